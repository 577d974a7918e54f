"""The ge.proto message classes, built by the protobuf library from graph_ir/proto/ge_ir.proto (and DumpData, CANN's
dump file header, from graph_ir/proto/dump_data.proto).

The package build compiles ge_ir.proto with protoc (grpcio-tools) into a descriptor set, ge_ir.desc, next to it;
here the protobuf runtime turns that descriptor into message classes, in a pool of their own so that another copy
of ge_ir.proto in the process (torchair's, CANN's) cannot clash.
"""

from __future__ import annotations

import os

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_HERE = os.path.dirname(os.path.abspath(__file__))
DESCRIPTOR_SET = os.path.join(_HERE, "ge_ir.desc")


def _load_pool() -> descriptor_pool.DescriptorPool:
    if not os.path.exists(DESCRIPTOR_SET):
        raise ImportError(
            f"{DESCRIPTOR_SET} is missing: the package was not built. Install it with `pip install .` (or "
            "`pip install -e .`), which compiles graph_ir/proto/ge_ir.proto."
        )
    files = descriptor_pb2.FileDescriptorSet()
    with open(DESCRIPTOR_SET, "rb") as f:
        files.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for file_proto in files.file:
        pool.Add(file_proto)
    return pool


POOL = _load_pool()


def _message(name: str):
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"ge.proto.{name}"))


ModelDef = _message("ModelDef")
GraphDef = _message("GraphDef")
OpDef = _message("OpDef")
TensorDescriptor = _message("TensorDescriptor")
TensorDef = _message("TensorDef")
ShapeDef = _message("ShapeDef")
AttrDef = _message("AttrDef")
NamedAttrs = _message("NamedAttrs")
ListValue = AttrDef.ListValue
# CANN's dump file header (graph_ir/proto/dump_data.proto, compiled into the same descriptor set).
DumpData = message_factory.GetMessageClass(POOL.FindMessageTypeByName("toolkit.dumpdata.DumpData"))
VT = {name: number for name, number in ListValue.ListValueType.items()}

__all__ = [
    "VT",
    "AttrDef",
    "DumpData",
    "GraphDef",
    "ListValue",
    "ModelDef",
    "NamedAttrs",
    "OpDef",
    "ShapeDef",
    "TensorDef",
    "TensorDescriptor",
]
