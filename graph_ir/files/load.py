"""Builds GE graphs back from a ge.proto.ModelDef read from an .air or .pbtxt file (graph_ir/files/read.py).

Files travel between people and machines, so nothing in them is trusted. Every fault is a GraphError naming the
node and the field: edges are parsed strictly ("name:index" with ASCII digits, the index in range) and bound to the
op's inputs by their input_desc names (a skipped optional input stays empty), the graph is walked without recursion,
every tensor's data must match its desc, every node is verified against its IR prototype and its stated output descs
against the inferred ones (computing no value: a Range's length, not its values), and the reserved NetOutput role is
checked. Subgraphs (graph[1:], addressed by name from the functional nodes' subgraph_name) are hostile too: a
missing, unnamed or duplicate graph, a graph used by no node or by two, a graph reachable from itself (recursion),
nesting deeper than control.MAX_SUBGRAPH_DEPTH and a wrong `_parent_node_index` are each a GraphError naming the
node and the field; the subgraphs are walked without recursion and built innermost first.
"""

from __future__ import annotations

import heapq
import re

import numpy as np

from graph_ir import proto
from graph_ir.dynamic import add_template_node, check_template
from graph_ir.dynamic.template import check_template_desc
from graph_ir.files.load_subgraphs import check_binding, graph_defs, subgraph_tree
from graph_ir.files.serialize import META_KEYS, ORIGINS_KEY
from graph_ir.ir import registry
from graph_ir.ir.dtypes import from_ge, from_proto
from graph_ir.ir.errors import GraphError
from graph_ir.ir.graph import NET_OUTPUT, Graph
from graph_ir.ir.nodes import Handle, TensorDesc
from graph_ir.ir.verify import check_shape
from graph_ir.opset import control

_EDGE = re.compile(r"([^:]+):(-1|0|[1-9][0-9]{0,8})", re.ASCII)


MAX_ORIGINS = 64  # the TF nodes a GE node names as its origins: more are not read


def _text(node: str, field: str, value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GraphError(f"node {node!r}: {field} holds a name that is not UTF-8: {e}") from None


def _edge(node: str, edge: str) -> tuple[str, int]:
    match = _EDGE.fullmatch(edge)
    if match is None:
        raise GraphError(f"node {node!r}: malformed input edge {edge[:80]!r}; expected 'node:index' with an index "
                         "0..999999999, or 'node:-1' for a control edge")
    return match.group(1), int(match.group(2))


def _desc(node: str, field: str, d, template_op: registry.IrOp | None = None) -> TensorDesc:
    """A desc from the file; in a template (a file with -1 dims, graph_ir/dynamic) of a node of `template_op`."""
    try:
        dtype = from_proto(d.dtype)
    except ValueError as e:
        raise GraphError(f"node {node!r}: {field} has {e}") from None
    shape = check_shape(node, field, d.shape.dim) if template_op is None else \
        check_template_desc(node, template_op, field, d.shape.dim)
    return TensorDesc(d.name, dtype, shape)


def _tensor(node: str, field: str, t) -> np.ndarray:
    desc = _desc(node, f"{field}.desc", t.desc)
    if desc.dtype.name == "variant":  # a TensorList handle exists only while a graph runs
        raise GraphError(f"node {node!r}: {field} is a variant tensor; a tensor attribute holds numbers")
    if len(t.data) != desc.nbytes:
        raise GraphError(f"node {node!r}: {field} holds {len(t.data)} bytes of data, but its desc "
                         f"{desc.dtype}{list(desc.shape)} needs {desc.nbytes}")
    array = np.frombuffer(t.data, dtype=np.dtype(desc.dtype.numpy).newbyteorder("<"))
    return array.astype(desc.dtype.numpy).reshape(desc.shape)


_FIELD = {"bool": "b", "int": "i", "float": "f", "string": "s", "type": "dt", "tensor": "t", "list_int": "list",
          "list_float": "list", "dtype_int": "i"}


def _attr(node: str, name: str, attr, spec: registry.IrAttr):
    kind = attr.WhichOneof("value")
    if kind != _FIELD[spec.type]:
        raise GraphError(f"node {node!r}: attribute {name!r} is stored as {kind!r}, expected {_FIELD[spec.type]!r} "
                         f"({spec.type})")
    if spec.type == "string":
        try:
            return attr.s.decode()
        except UnicodeDecodeError:
            raise GraphError(f"node {node!r}: attribute {name!r} is not valid UTF-8") from None
    if spec.type in ("type", "dtype_int"):
        try:
            return from_ge(attr.dt if spec.type == "type" else attr.i)
        except ValueError as e:
            raise GraphError(f"node {node!r}: attribute {name!r} has {e}") from None
    if spec.type == "tensor":
        return _tensor(node, f"attribute {name!r}", attr.t)
    if spec.type in ("list_int", "list_float"):
        return _number_list(node, name, attr.list, "i" if spec.type == "list_int" else "f")
    return getattr(attr, kind)


_VT_NAMES = {number: name for name, number in proto.VT.items()}


def _number_list(node: str, name: str, values, field: str = "i") -> list:
    """A list attr of ints (field "i", val_type VT_LIST_INT) or floats ("f", VT_LIST_FLOAT), or unset for an empty
    list, with no values of another kind (a list of floats would otherwise read as an empty int list)."""
    kind, what = ("VT_LIST_INT", "ints") if field == "i" else ("VT_LIST_FLOAT", "floats")
    others = [f.name for f, _ in values.ListFields() if f.name not in (field, "val_type")]
    items = getattr(values, field)
    kind_name = _VT_NAMES.get(values.val_type, str(values.val_type))
    if others or kind_name not in (kind, "VT_LIST_NONE") or (kind_name == "VT_LIST_NONE" and items):
        raise GraphError(f"node {node!r}: attribute {name!r} must be a list of {what} (val_type {kind}), got "
                         f"val_type {kind_name} with fields {sorted({*others, field} if items else set(others))}")
    return list(items)


def _bind_inputs(node: str, spec: registry.IrOp, op_def, handles: list[Handle]) -> list[Handle | None]:
    """The data inputs in IR order. An op whose optional inputs may be skipped (MatMulV2's bias before offset_w) is
    bound by the input_desc names the serializer and GE write (one per data edge), not by count: MatMulV2 with
    offset_w and no bias keeps bias empty. Without those names, the edges fill the IR inputs from the first."""
    names = [d.name for d in op_def.input_desc]
    if spec.dynamic_input is not None or len(names) != len(handles) or not handles:
        return handles
    ports = [i.name for i in spec.inputs]
    bound: list[Handle | None] = [None] * len(ports)
    for k, (port, h) in enumerate(zip(names, handles)):
        if port not in ports:
            raise GraphError(f"node {node!r} ({spec.type}): input_desc[{k}] names input {port[:80]!r}, which "
                             f"{spec.type} does not have (inputs in IR order: {', '.join(ports)})")
        if bound[ports.index(port)] is not None:
            raise GraphError(f"node {node!r} ({spec.type}): input_desc names input {port!r} twice")
        bound[ports.index(port)] = h
    while bound and bound[-1] is None:
        bound.pop()
    return bound


def _order(graph_name: str, op_defs: dict) -> list[tuple[str, list[tuple[str, int]]]]:
    """The nodes in topological order (Kahn's algorithm, no recursion), each with its parsed edges."""
    edges = {name: [_edge(name, e) for e in op.input] for name, op in op_defs.items()}
    waiting = {name: 0 for name in op_defs}
    users: dict[str, list[str]] = {name: [] for name in op_defs}
    for name, node_edges in edges.items():
        for src, _ in node_edges:
            if src not in op_defs:
                raise GraphError(f"node {name!r}: an input edge refers to node {src[:80]!r}, which graph "
                                 f"{graph_name!r} does not have")
            waiting[name] += 1
            users[src].append(name)
    position = {name: k for k, name in enumerate(op_defs)}
    ready = [(position[name], name) for name, count in waiting.items() if count == 0]
    heapq.heapify(ready)  # the file's own order wherever the edges allow it, so a round trip is byte-identical
    order = []
    while ready:
        _, name = heapq.heappop(ready)
        order.append((name, edges[name]))
        for user in users[name]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (position[user], user))
    if len(order) != len(op_defs):
        stuck = next(name for name, count in waiting.items() if count > 0)
        raise GraphError(f"graph {graph_name!r} has a cycle through node {stuck!r}")
    return order


def from_model_def(model) -> Graph:
    """Rebuilds a Graph from a ModelDef (graph[0] the root, the others its subgraphs), verifying every node against
    the registry."""
    if not model.graph:
        raise GraphError(f"ModelDef {model.name!r} holds 0 graphs; graph[0] is the root graph")
    root_def = model.graph[0]
    root_name = root_def.name or model.name
    defs = graph_defs(model, root_name)
    parents, depth = subgraph_tree(root_name, root_def, defs)
    built: dict[str, Graph] = {}
    template = _is_template(model)
    for sub in sorted(defs, key=lambda name: -depth[name]):
        built[sub] = _build_graph(defs[sub], sub, built, parents[sub], template)
    root = _build_graph(root_def, root_name, built, None, template)
    root.subgraphs = {name: built[name] for name in defs}  # the file's order, so a round trip is byte-identical
    if _is_template(model):
        check_template(root)
    return root


def _is_template(model) -> bool:
    """Whether a desc of the model has a negative dim: then it is read as a template (graph_ir/dynamic), whose
    own checks refuse every negative dim but -1."""
    return any(d < 0 for g in model.graph for op in g.op for desc in op.output_desc for d in desc.shape.dim)


def _build_graph(graph_def, graph_name: str, built: dict[str, Graph], parent: tuple[str, str, int] | None,
                 template: bool) -> Graph:
    graph = Graph(graph_name)
    op_defs = {}
    for op in graph_def.op:
        if not op.name or ":" in op.name:
            raise GraphError(f"graph {graph.name!r}: a node of type {op.type[:80]!r} has the invalid name "
                             f"{op.name[:80]!r}")
        if op.name in op_defs:
            raise GraphError(f"graph {graph.name!r} has two nodes named {op.name!r}")
        if (op.type == NET_OUTPUT) != (op.name == NET_OUTPUT):
            raise GraphError(f"node {op.name!r} ({op.type}): the name {NET_OUTPUT!r} belongs to the one node of type "
                             f"{NET_OUTPUT}")
        op_defs[op.name] = op
    for name, edges in _order(graph.name, op_defs):
        op_def = op_defs[name]
        spec = registry.get(op_def.type, node=name)
        inputs = _bind_inputs(name, spec, op_def,
                              [Handle(graph.nodes[src], index) for src, index in edges if index >= 0])
        controls = [graph.nodes[src] for src, index in edges if index < 0]
        specs = {a.name: a for a in spec.attrs}
        bindings = (control.PARENT_INDEX_ATTR,) if parent is not None and op_def.type == "Data" else ()
        unknown = [k for k in op_def.attr if k not in specs and k not in (*META_KEYS, ORIGINS_KEY) and k not in bindings]
        if unknown:
            raise GraphError(f"node {name!r} ({op_def.type}) has attributes the registry does not know: "
                             f"{sorted(unknown)[:8]}")
        attrs = {k: _attr(name, k, v, specs[k]) for k, v in op_def.attr.items() if k in specs}
        descs = [_desc(name, f"output_desc[{k}]", d, spec if template else None)
                 for k, d in enumerate(op_def.output_desc)]
        subgraphs = [built[sub] for sub in op_def.subgraph_name]
        node = add_template_node(graph, op_def.type, inputs, attrs, name=name, control_inputs=controls,
                                 output_descs=descs, subgraphs=subgraphs) if template else \
            graph.add_node(op_def.type, inputs, attrs, name=name, control_inputs=controls, output_descs=descs,
                           exact_name=True, subgraphs=subgraphs)
        if ORIGINS_KEY in op_def.attr:
            node.origins = [_text(name, ORIGINS_KEY, v) for v in op_def.attr[ORIGINS_KEY].list.s[:MAX_ORIGINS]]
        if parent is not None:
            check_binding(graph.name, node, op_def, parent)
    if NET_OUTPUT in graph.nodes:
        graph.outputs = list(graph.nodes[NET_OUTPUT].inputs)
    return graph
