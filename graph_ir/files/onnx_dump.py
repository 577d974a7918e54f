"""A GE graph as GE's own graph dump writes it: GE's ops in an ONNX ModelProto (ge_onnx_*.pbtxt when GE runs with
DUMP_GE_GRAPH), which Netron opens. Built from the ge.proto ModelDef graph_ir serializes (graph_ir/files/serialize.py), as
GE builds it from its own (metadef's graph/utils/ge_ir_utils.cc, OnnxUtils::ConvertGeModelToModelProto):
- each op is a NodeProto named as the op, op_type "ge:" + its GE type (GE's prefix, so that Netron does not read a
  GE op as the ONNX op of that name), inputs "producer:index" and control inputs "producer:-1", outputs
  "name:index" for each output something reads (and "name:-1" for control readers);
- its attributes, sorted by name: input_desc_nums / output_desc_nums, and per port input_desc_dtype:k (GE's
  DT_* names), _origin_dtype, _shape, _origin_shape, _layout, _origin_layout; the op's attrs by name (ints, floats,
  bools as ints, strings, lists; a tensor as name_desc_dtype, _desc_shape, _desc_layout, and with `with_data` its
  bytes as name_data); _input_name_key / _input_name_value;
- the graph's inputs are its Data nodes and its outputs the ops feeding NetOutput, each a ValueInfoProto named as
  the node, with GE's ONNX element type (0 where GE maps none: bfloat16, complex64);
- every subgraph (nested ones too) is one more node of the root graph, op_type "subgraph", whose GRAPH attribute
  "graph" holds it encoded the same way.
graph_ir also writes dtype attrs as their DT_* name (GE's dump leaves them out) and string attrs at every level
(GE's drops them unless it dumps data too). The protobuf classes are the `onnx` package's (pip install onnx)."""

from __future__ import annotations

from typing import Any

from graph_ir import proto
from graph_ir.files.serialize import write_message
from graph_ir.ir.dtypes import from_ge

# GE's kGeDataTypeToOnnxMap (ge_ir_utils.cc): ge.proto dtype -> ONNX TensorProto elem_type.
_ONNX_TYPES = {"DT_INT64": 7, "DT_UINT64": 13, "DT_FLOAT": 1, "DT_INT32": 6, "DT_UINT32": 12, "DT_INT8": 3,
               "DT_UINT8": 2, "DT_INT16": 5, "DT_UINT16": 4, "DT_FLOAT16": 10, "DT_DOUBLE": 11, "DT_BOOL": 9}
_INT, _FLOAT, _STRING, _GRAPH, _FLOATS, _INTS, _STRINGS = 2, 1, 3, 5, 6, 7, 8  # onnx AttributeProto.AttributeType


def _onnx():
    try:
        import onnx
    except ImportError as e:
        raise ImportError("writing GE's ONNX-format graph dump needs the onnx package: pip install onnx") from e
    return onnx


_DT_NAMES = {v.number: v.name for v in proto.POOL.FindEnumTypeByName("ge.proto.DataType").values}
_VT_NAMES = {number: name for name, number in proto.VT.items()}


def _dt_name(proto_number: int) -> str:
    """GE's serial name of a ge.proto dtype (TypeUtils::DataTypeToSerialString: DT_FLOAT, DT_BF16, ...)."""
    return _DT_NAMES.get(proto_number, f"DT_UNDEFINED({proto_number})")


def _add(node, name: str, kind: int, value: Any) -> None:
    attr = node.attribute.add()
    attr.name, attr.type = name, kind
    if kind == _INT:
        attr.i = int(value)
    elif kind == _FLOAT:
        attr.f = float(value)
    elif kind == _STRING:
        attr.s = value if isinstance(value, bytes) else str(value).encode()
    elif kind == _INTS:
        attr.ints.extend(int(v) for v in value)
    elif kind == _FLOATS:
        attr.floats.extend(float(v) for v in value)
    elif kind == _STRINGS:
        attr.strings.extend(v if isinstance(v, bytes) else str(v).encode() for v in value)


def _descs(node, side: str, descs) -> None:
    _add(node, f"{side}_desc_nums", _INT, len(descs))
    for k, desc in enumerate(descs):
        dtype = _dt_name(desc.dtype)
        for key, kind, value in (("dtype", _STRING, dtype), ("origin_dtype", _STRING, dtype),
                                 ("shape", _INTS, desc.shape.dim), ("origin_shape", _INTS, desc.shape.dim),
                                 ("layout", _STRING, desc.layout or "ND"), ("origin_layout", _STRING, desc.layout or "ND")):
            _add(node, f"{side}_desc_{key}:{k}", kind, value)


def _attrs(node, attrs, with_data: bool) -> None:
    lists = {"VT_LIST_INT": ("i", _INTS), "VT_LIST_FLOAT": ("f", _FLOATS), "VT_LIST_BOOL": ("b", _INTS),
             "VT_LIST_STRING": ("s", _STRINGS)}
    for name, attr in sorted(attrs.items()):
        kind = attr.WhichOneof("value")
        if kind == "i":
            _add(node, name, _INT, attr.i)
        elif kind == "f":
            _add(node, name, _FLOAT, attr.f)
        elif kind == "b":
            _add(node, name, _INT, attr.b)
        elif kind == "s":
            _add(node, name, _STRING, attr.s)
        elif kind == "dt":
            _add(node, name, _STRING, _dt_name(from_ge(attr.dt).proto))
        elif kind == "t":
            desc = attr.t.desc
            _add(node, f"{name}_desc_dtype", _STRING, _dt_name(desc.dtype))
            _add(node, f"{name}_desc_shape", _INTS, desc.shape.dim)
            _add(node, f"{name}_desc_layout", _STRING, desc.layout or "ND")
            if with_data:
                _add(node, f"{name}_data", _STRING, attr.t.data)
        elif kind == "list":
            list_type = _VT_NAMES.get(attr.list.val_type)
            if list_type in lists:
                field, onnx_kind = lists[list_type]
                _add(node, name, onnx_kind, getattr(attr.list, field))


def _value_info(graph_proto, side: str, name: str, desc) -> None:
    info = getattr(graph_proto, side).add()
    info.name = name
    tensor = info.type.tensor_type
    tensor.elem_type = _ONNX_TYPES.get(_dt_name(desc.dtype), 0)
    for d in desc.shape.dim:
        tensor.shape.dim.add().dim_value = d


def _encode_graph(graph_def, graph_proto, with_data: bool) -> None:
    graph_proto.name = graph_def.name
    readers: dict[str, set[str]] = {}  # producer -> the "index" strings something reads ("-1": control)
    for op in graph_def.op:
        for source in op.input:
            if source:
                producer, _, index = source.rpartition(":")
                readers.setdefault(producer, set()).add(index)
    for op in graph_def.op:
        if op.type == "Data":
            _value_info(graph_proto, "input", op.name, op.output_desc[0])
        if op.type == "NetOutput":
            for source, desc in zip(op.input, op.input_desc):
                if not source.endswith(":-1"):
                    _value_info(graph_proto, "output", source.rpartition(":")[0], desc)
    for op in graph_def.op:
        node = graph_proto.node.add()
        node.name, node.op_type = op.name, f"ge:{op.type}"
        node.input.extend(op.input)
        node.output.extend(f"{op.name}:{i}" for i in sorted(readers.get(op.name, ()), key=int) if i != "-1")
        if "-1" in readers.get(op.name, ()):
            node.output.append(f"{op.name}:-1")
        _descs(node, "input", op.input_desc)
        _descs(node, "output", op.output_desc)
        _attrs(node, op.attr, with_data)
        if op.subgraph_name:
            _add(node, "subgraph_name", _STRINGS, op.subgraph_name)
        node.attribute.sort(key=lambda a: a.name)


def model_proto(model_def, with_data: bool = False):
    """GE's ONNX-format dump (an onnx.ModelProto) of a ge.proto ModelDef; `with_data` adds the Consts' and
    Variables' bytes, as GE's DUMP_GE_GRAPH=1 does (its level 2, without them, is the default here)."""
    onnx = _onnx()
    model = onnx.ModelProto()
    model.ir_version = onnx.IR_VERSION
    model.producer_name = model_def.name
    model.model_version = model_def.version
    root, *subgraphs = model_def.graph
    _encode_graph(root, model.graph, with_data)
    for sub in subgraphs:
        node = model.graph.node.add()
        node.name, node.op_type = sub.name, "subgraph"
        attr = node.attribute.add()
        attr.name, attr.type = "graph", _GRAPH
        _encode_graph(sub, attr.g, with_data)
    return model


def write(model_def, path: str, with_data: bool = False) -> None:
    """Writes GE's ONNX-format dump of `model_def`: binary for .onnx, protobuf text for .onnx.pbtxt."""
    write_message(model_proto(model_def, with_data), path, ".onnx", ".onnx.pbtxt",
                  f"graph dump {path!r}: use a .onnx (binary) or .onnx.pbtxt (text) name")
