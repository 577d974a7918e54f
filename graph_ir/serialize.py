"""Graph <-> ge.proto.ModelDef, through the protobuf library (graph_ir/proto), and .air / .pbtxt files.

Following CANN's conventions (see ../shared/research/ge_ir.md §1–3, §7):
- OpDef.input holds "node:index" data edges in IR order, then "node:-1" control edges;
- input_desc copies each producer's output desc renamed to the IR input name; output_desc uses the IR output names
  (a ref output has its input's name); layout "ND"; TensorDescriptor.dtype uses the proto numbering;
- AttrDef.dt (a dtype attr, e.g. Cast's dst_type) uses the C++ ge::DataType numbering;
- every list attr sets val_type (GE's deserializer drops a list whose val_type is VT_LIST_NONE);
- _input_name_key/_input_name_value and _output_name_key/_output_name_value give GE the port names, from which it
  derives the ref (in-place) ports.
"""

from __future__ import annotations

import numpy as np
from google.protobuf import text_format

from graph_ir import ir, proto
from graph_ir.dtypes import as_dtype, from_ge, from_proto
from graph_ir.graph import Graph, GraphError, Handle, Node, TensorDesc

_META_KEYS = ("_input_name_key", "_input_name_value", "_output_name_key", "_output_name_value")


def _fill_desc(out, desc: TensorDesc) -> None:
    out.name = desc.name
    out.dtype = desc.dtype.proto
    out.layout = "ND"
    out.shape.dim.extend(desc.shape)


def _read_desc(d) -> TensorDesc:
    return TensorDesc(d.name, from_proto(d.dtype), tuple(int(x) for x in d.shape.dim))


def _fill_tensor(out, name: str, array: np.ndarray) -> None:
    _fill_desc(out.desc, TensorDesc(name, as_dtype(array.dtype), tuple(array.shape)))
    out.data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False).tobytes()


def _read_tensor(t) -> np.ndarray:
    desc = _read_desc(t.desc)
    array = np.frombuffer(t.data, dtype=np.dtype(desc.dtype.numpy).newbyteorder("<"))
    return array.astype(desc.dtype.numpy).reshape(desc.shape).copy()


def _string_list(attr, values) -> None:
    attr.list.val_type = proto.VT["VT_LIST_STRING"]
    attr.list.s.extend(v.encode() for v in values)


def _int_list(attr, values) -> None:
    attr.list.val_type = proto.VT["VT_LIST_INT"]
    attr.list.i.extend(values)


def _write_attr(attr, spec: ir.IrAttr, value) -> None:
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
    elif spec.type == "tensor":
        _fill_tensor(attr.t, "y", value)
    elif spec.type == "list_int":
        _int_list(attr, value)
    else:
        raise AssertionError(spec.type)


def _read_attr(attr, spec: ir.IrAttr):
    kind = attr.WhichOneof("value")
    expected = {"bool": "b", "int": "i", "float": "f", "string": "s", "type": "dt", "tensor": "t", "list_int": "list"}
    if kind != expected[spec.type]:
        raise GraphError(f"attribute {spec.name!r} is stored as {kind!r}, expected {expected[spec.type]!r}")
    if spec.type == "string":
        return attr.s.decode()
    if spec.type == "type":
        return from_ge(attr.dt)
    if spec.type == "tensor":
        return _read_tensor(attr.t)
    if spec.type == "list_int":
        return list(attr.list.i)
    return getattr(attr, kind)


def _op_def(node: Node, out) -> None:
    out.name = node.name
    out.type = node.type
    out.input.extend(h.edge for h in node.inputs if h is not None)
    out.input.extend(f"{c.name}:-1" for c in node.control_inputs)
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
    _string_list(out.attr["_input_name_key"], [d.name for d in input_descs])
    _int_list(out.attr["_input_name_value"], range(len(input_descs)))
    _string_list(out.attr["_output_name_key"], [d.name for d in node.output_descs])
    _int_list(out.attr["_output_name_value"], range(len(node.output_descs)))


def to_model_def(graph: Graph):
    """The graph as a ge.proto.ModelDef with one GraphDef (graph[0], the root graph)."""
    model = proto.ModelDef(name=graph.name)
    graph_def = model.graph.add(name=graph.name)
    for node in graph.topological_order():
        _op_def(node, graph_def.op.add())
    return model


def from_model_def(model) -> Graph:
    """Rebuilds a Graph from a ModelDef (its root graph), verifying every node against the registry."""
    if not model.graph:
        raise GraphError(f"ModelDef {model.name!r} has no graph")
    graph_def = model.graph[0]
    graph = Graph(graph_def.name or model.name)
    ops = {op.name: op for op in graph_def.op}
    if len(ops) != len(graph_def.op):
        raise GraphError(f"graph {graph.name!r} has duplicate node names")
    building: set[str] = set()

    def build(name: str) -> Node:
        if name in graph.nodes:
            return graph.nodes[name]
        if name not in ops:
            raise GraphError(f"an edge refers to node {name!r}, which graph {graph.name!r} does not have")
        if name in building:
            raise GraphError(f"graph {graph.name!r} has a cycle through node {name!r}")
        building.add(name)
        op_def = ops[name]
        spec = ir.get(op_def.type)
        inputs, controls = [], []
        for edge in op_def.input:
            src, _, index = edge.rpartition(":")
            if not src:
                raise GraphError(f"node {name!r}: malformed edge {edge!r} (expected 'node:index')")
            if int(index) < 0:
                controls.append(build(src))
            else:
                inputs.append(Handle(build(src), int(index)))
        specs = {a.name: a for a in spec.attrs}
        attrs = {k: _read_attr(v, specs[k]) for k, v in op_def.attr.items() if k in specs}
        unknown = [k for k in op_def.attr if k not in specs and k not in _META_KEYS]
        if unknown:
            raise GraphError(f"node {name!r} ({op_def.type}) has attributes the registry does not know: {unknown}")
        descs = [_read_desc(d) for d in op_def.output_desc]
        node = graph.add_node(op_def.type, inputs, attrs, name=name, control_inputs=controls,
                              output_descs=descs, exact_name=True)
        building.discard(name)
        return node

    for name in ops:
        build(name)
    if "NetOutput" in graph.nodes:
        graph.outputs = list(graph.nodes["NetOutput"].inputs)
    return graph


def save(graph: Graph, path: str) -> None:
    model = to_model_def(graph)
    if path.endswith(".pbtxt"):
        with open(path, "w") as f:
            f.write(text_format.MessageToString(model))
    elif path.endswith(".air"):
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
    else:
        raise ValueError(f"graph file {path!r}: use a .air (binary ModelDef) or .pbtxt (text format) name")


def load(path: str) -> Graph:
    """Reads a Graph from an .air (binary ge.proto.ModelDef) or .pbtxt (text format) file."""
    model = proto.ModelDef()
    if path.endswith(".pbtxt"):
        with open(path) as f:
            text_format.Parse(f.read(), model)
    elif path.endswith(".air"):
        with open(path, "rb") as f:
            model.ParseFromString(f.read())
    else:
        raise ValueError(f"graph file {path!r}: use a .air (binary ModelDef) or .pbtxt (text format) name")
    return from_model_def(model)


def loads(data: bytes) -> Graph:
    """A Graph from a serialized binary ModelDef."""
    model = proto.ModelDef()
    model.ParseFromString(data)
    return from_model_def(model)
