"""Graph -> ge.proto.ModelDef, through the protobuf library (graph_ir/proto), and .air / .pbtxt files (reading them
back is graph_ir/files/load.py).

Following CANN's conventions (metadef's proto/ge_ir.proto, GE's graph/serialization/, torchair's GE builder):
- OpDef.input holds "node:index" data edges in IR order, then "node:-1" control edges;
- input_desc copies each producer's output desc renamed to the IR input name; output_desc uses the IR output names
  (a ref output has its input's name); layout "ND"; TensorDescriptor.dtype uses the proto numbering;
- a dtype attr uses the C++ ge::DataType numbering: in AttrDef.dt for a REG_OP Type attr, in AttrDef.i for an Int
  one (Cast's dst_type, REQUIRED_ATTR(dst_type, Int) in ops-math math/cast/op_graph/cast_proto.h);
- every list attr sets val_type (GE's deserializer drops a list whose val_type is VT_LIST_NONE);
- _input_name_key/_input_name_value and _output_name_key/_output_name_value give GE the port names, from which it
  derives the ref (in-place) ports;
- subgraphs (metadef's graph/serialization/model_serialize.cc): ModelDef.graph[0] is the root, every subgraph
  (nested ones too) another GraphDef addressed by its name; a functional node lists its subgraphs' names in
  OpDef.subgraph_name in IR order; a subgraph's Data carries `_parent_node_index` (the parent input it stands for)
  and its NetOutput's input descs the parent output each result is (not for a While's cond), as GE's DataPass
  sets them (graph_ir/opset/control.py).
"""

from __future__ import annotations

import numpy as np
from google.protobuf import text_format

from graph_ir import proto
from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.nodes import Node, TensorDesc
from graph_ir.ir.registry import IrAttr
from graph_ir.opset.control import PARENT_INDEX_ATTR, data_offset, maps_outputs

META_KEYS = ("_input_name_key", "_input_name_value", "_output_name_key", "_output_name_value")
# A node's TF origins (Node.origins), as GE names the attribute (ge::ATTR_NAME_DATA_DUMP_ORIGIN_OP_NAMES, metadef's
# graph/debug/ge_attr_define.h): what GE's dumps and Ascend's accuracy tools map a GE node back to its TF nodes by.
ORIGINS_KEY = "_datadump_original_op_names"


def _fill_desc(out, desc: TensorDesc) -> None:
    out.name = desc.name
    out.dtype = desc.dtype.proto
    out.layout = "ND"
    out.shape.dim.extend(desc.shape)


def _fill_tensor(out, name: str, array: np.ndarray) -> None:
    _fill_desc(out.desc, TensorDesc(name, as_dtype(array.dtype), tuple(array.shape)))
    out.data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False).tobytes()


def _string_list(attr, values) -> None:
    attr.list.val_type = proto.VT["VT_LIST_STRING"]
    attr.list.s.extend(v.encode() for v in values)


def _int_list(attr, values) -> None:
    attr.list.val_type = proto.VT["VT_LIST_INT"]
    attr.list.i.extend(values)


def _float_list(attr, values) -> None:
    attr.list.val_type = proto.VT["VT_LIST_FLOAT"]
    attr.list.f.extend(values)


def _write_attr(attr, spec: IrAttr, value) -> None:
    if spec.type == "bool":
        attr.b = value
    elif spec.type == "int":
        attr.i = value
    elif spec.type == "float":
        attr.f = value
    elif spec.type == "string":
        attr.s = value.encode()
    elif spec.type == "type":
        attr.dt = value.ge  # the C++ numbering, as GE's data_type_serializer writes it
    elif spec.type == "dtype_int":
        attr.i = value.ge  # an Int attr holding the C++ numbering (Cast's dst_type, as CANN's TF plugin writes it)
    elif spec.type == "tensor":
        _fill_tensor(attr.t, "y", value)
    elif spec.type == "list_int":
        _int_list(attr, value)
    elif spec.type == "list_float":
        _float_list(attr, value)
    else:
        raise AssertionError(spec.type)


def _op_def(node: Node, out) -> None:
    out.name = node.name
    out.type = node.type
    out.input.extend(h.edge for h in node.inputs if h is not None)
    out.input.extend(f"{c.name}:-1" for c in node.control_inputs)
    out.subgraph_name.extend(node.subgraphs)
    specs = {a.name: a for a in node.op.attrs}
    for key, value in node.attrs.items():
        _write_attr(out.attr[key], specs[key], value)
    input_descs = node.input_descs()
    if node.type in ("Data", "RefData"):
        input_descs = [node.output_descs[0].renamed("x")]  # as torchair: the Data's x mirrors its y
    for d in input_descs:
        _fill_desc(out.input_desc.add(), d)
    for d in node.output_descs:
        _fill_desc(out.output_desc.add(), d)
    if node.origins:
        _string_list(out.attr[ORIGINS_KEY], node.origins)
    _string_list(out.attr["_input_name_key"], [d.name for d in input_descs])
    _int_list(out.attr["_input_name_value"], range(len(input_descs)))
    _string_list(out.attr["_output_name_key"], [d.name for d in node.output_descs])
    _int_list(out.attr["_output_name_value"], range(len(node.output_descs)))


def _mark_parent_indices(graph_def, parent_type: str, position: int) -> None:
    """GE's bindings of a subgraph to its parent node (see the module docstring)."""
    for op in graph_def.op:
        if op.type == "Data":
            op.attr[PARENT_INDEX_ATTR].i = op.attr["index"].i + data_offset(parent_type)
        elif op.type == "NetOutput" and maps_outputs(parent_type, position):
            for j, desc in enumerate(op.input_desc):
                desc.attr[PARENT_INDEX_ATTR].i = j


def to_model_def(name: str, nodes: list[Node], subgraphs: list[tuple[str, list[Node], str, int]] = ()):
    """A ge.proto.ModelDef: graph[0] is the root graph of `nodes` (in topological order), then one GraphDef per
    subgraph (name, nodes in topological order, the parent node's type, its position among the parent's
    subgraphs)."""
    model = proto.ModelDef(name=name)
    graph_def = model.graph.add(name=name)
    for node in nodes:
        _op_def(node, graph_def.op.add())
    for sub_name, sub_nodes, parent_type, position in subgraphs:
        sub_def = model.graph.add(name=sub_name)
        for node in sub_nodes:
            _op_def(node, sub_def.op.add())
        _mark_parent_indices(sub_def, parent_type, position)
    return model


def write_message(message, path: str, binary: str, text: str, refusal: str) -> None:
    """Writes a protobuf message: binary where `path` ends in `binary`, text format where it ends in `text`, else a
    ValueError saying `refusal`."""
    if path.endswith(text):
        with open(path, "w") as f:
            f.write(text_format.MessageToString(message))
    elif path.endswith(binary):
        with open(path, "wb") as f:
            f.write(message.SerializeToString())
    else:
        raise ValueError(refusal)


def write(model, path: str) -> None:
    """Writes a ModelDef: binary for .air, protobuf text format for .pbtxt."""
    write_message(model, path, ".air", ".pbtxt",
                  f"graph file {path!r}: use a .air (binary ModelDef) or .pbtxt (text format) name")
