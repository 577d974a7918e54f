"""The GE graph builder: `Graph`, nodes, handles (node, output index), the Data/Const/Variable builders, and the
verifier that checks every node against its IR prototype (graph_ir/ir.py) as it is added.

Inside ``with graph:`` the builders add nodes to that graph (a thread-local stack, as torchair's GeGraph). Names are
unique within a graph: a taken name gets a ``_1``, ``_2``... suffix. Control edges are kept per node and written as
``name:-1`` when serialized.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import numpy as np

from graph_ir import ir
from graph_ir.dtypes import DType, as_dtype


class GraphError(ValueError):
    """A graph that does not satisfy an op's IR prototype or the builder's rules."""


@dataclass(frozen=True)
class TensorDesc:
    """What flows on an edge: the IR port name, dtype and shape (() is a scalar)."""

    name: str
    dtype: DType
    shape: tuple[int, ...]

    @property
    def num_elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def renamed(self, name: str) -> TensorDesc:
        return TensorDesc(name, self.dtype, self.shape)


@dataclass(frozen=True)
class Handle:
    """Output `index` of `node`: what builders take and return."""

    node: Node
    index: int = 0

    @property
    def desc(self) -> TensorDesc:
        return self.node.output_descs[self.index]

    @property
    def dtype(self) -> DType:
        return self.desc.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.desc.shape

    @property
    def edge(self) -> str:
        return f"{self.node.name}:{self.index}"

    def __repr__(self) -> str:
        return f"<{self.edge} {self.dtype} {list(self.shape)}>"


@dataclass(eq=False)
class Node:
    name: str
    op: ir.IrOp
    inputs: list[Handle | None]  # data inputs in IR order (None for an unfed optional input)
    attrs: dict[str, Any]
    output_descs: list[TensorDesc]
    control_inputs: list[Node] = field(default_factory=list)

    @property
    def type(self) -> str:
        return self.op.type

    def output(self, index: int = 0) -> Handle:
        return Handle(self, index)

    def input_descs(self) -> list[TensorDesc]:
        """The consumer's copy of each producer's output desc, renamed to this op's IR input name (as in GE)."""
        names = [i.name for i in self.op.inputs]
        if self.op.inputs and self.op.inputs[-1].dynamic:
            names = [f"input{k}" for k in range(len(self.inputs))]
        return [h.desc.renamed(n) for n, h in zip(names, self.inputs) if h is not None]

    def __repr__(self) -> str:
        return f"<Node {self.name} ({self.type})>"


_STACK = threading.local()


def default_graph() -> Graph:
    stack = getattr(_STACK, "graphs", [])
    if not stack:
        raise GraphError("no graph: build nodes inside `with graph_ir.Graph(name) as graph:`")
    return stack[-1]


class Graph:
    """A GE graph (one GraphDef of a ModelDef). Use ``with graph:`` to add nodes with the builders."""

    def __init__(self, name: str = "graph"):
        self.name = name
        self.nodes: dict[str, Node] = {}
        self.outputs: list[Handle] = []

    def __enter__(self) -> Self:
        _STACK.graphs = [*getattr(_STACK, "graphs", []), self]
        return self

    def __exit__(self, *exc) -> None:
        _STACK.graphs.pop()

    def __repr__(self) -> str:
        return f"<graph_ir.Graph {self.name!r}: {len(self.nodes)} nodes>"

    # -- building -------------------------------------------------------------------------------------------------

    def unique_name(self, base: str) -> str:
        if base not in self.nodes:
            return base
        k = 1
        while f"{base}_{k}" in self.nodes:
            k += 1
        return f"{base}_{k}"

    def add_node(self, op_type: str, inputs: Sequence[Handle | None] = (), attrs: dict[str, Any] | None = None,
                 *, name: str | None = None, control_inputs: Iterable[Handle | Node] = (),
                 output_descs: list[TensorDesc] | None = None, exact_name: bool = False) -> Node:
        """Adds a node after checking it against its IR prototype; returns it. `output_descs` is needed only for
        the graph inputs (Data/RefData), whose dtype and shape cannot be inferred."""
        op = ir.get(op_type)
        node_name = name or op_type
        if exact_name and node_name in self.nodes:
            raise GraphError(f"a node named {node_name!r} already exists in graph {self.name!r}")
        node_name = self.unique_name(node_name)
        inputs = list(inputs)
        for h in inputs:
            if h is not None and (not isinstance(h, Handle) or self.nodes.get(h.node.name) is not h.node):
                raise GraphError(f"{op_type} {node_name!r}: input {h!r} is not an output of a node of graph "
                                 f"{self.name!r}")
        controls = [c.node if isinstance(c, Handle) else c for c in control_inputs]
        for c in controls:
            if self.nodes.get(c.name) is not c:
                raise GraphError(f"{op_type} {node_name!r}: control input {c!r} is not a node of graph {self.name!r}")
        full_attrs = verify_attrs(op, node_name, attrs or {})
        verify_inputs(op, node_name, inputs)
        descs = output_descs if output_descs is not None else infer_outputs(op, node_name, inputs, full_attrs)
        node = Node(node_name, op, inputs, full_attrs, descs, controls)
        self.nodes[node_name] = node
        return node

    def set_outputs(self, handles: Sequence[Handle], control_inputs: Iterable[Handle | Node] = ()) -> Node:
        """Sets the NetOutput node: its inputs are what run_graph returns, in order. Ops with side effects that are
        not returned should be listed in control_inputs (or are kept anyway: nothing is pruned here)."""
        old = self.nodes.pop("NetOutput", None)
        try:
            node = self.add_node("NetOutput", list(handles), name="NetOutput", control_inputs=control_inputs)
        except Exception:
            if old is not None:
                self.nodes["NetOutput"] = old
            raise
        self.outputs = list(handles)
        return node

    # -- views ----------------------------------------------------------------------------------------------------

    def nodes_of_type(self, op_type: str) -> list[Node]:
        return [n for n in self.nodes.values() if n.type == op_type]

    def node(self, name: str) -> Node:
        if name not in self.nodes:
            raise KeyError(f"graph {self.name!r} has no node {name!r}")
        return self.nodes[name]

    def topological_order(self) -> list[Node]:
        """Nodes so that every data and control input comes first; a cycle is an error naming a node on it."""
        order, state = [], {}
        for root in self.nodes.values():
            stack = [(root, False)]
            while stack:
                node, done = stack.pop()
                if done:
                    state[node.name] = 2
                    order.append(node)
                    continue
                if state.get(node.name) == 2:
                    continue
                if state.get(node.name) == 1:
                    raise GraphError(f"graph {self.name!r} has a cycle through node {node.name!r}")
                state[node.name] = 1
                stack.append((node, True))
                preds = [h.node for h in node.inputs if h is not None] + node.control_inputs
                for p in reversed(preds):
                    if state.get(p.name) != 2:
                        if state.get(p.name) == 1:
                            raise GraphError(f"graph {self.name!r} has a cycle through node {p.name!r}")
                        stack.append((p, False))
        return order

    def verify(self) -> None:
        """Re-checks every node (e.g. after loading) and that the graph is acyclic."""
        for node in self.nodes.values():
            verify_attrs(node.op, node.name, node.attrs)
            verify_inputs(node.op, node.name, node.inputs)
        self.topological_order()

    # -- serialization (graph_ir/serialize.py) ---------------------------------------------------------------------

    def to_model_def(self):
        from graph_ir import serialize

        return serialize.to_model_def(self)

    def serialize(self) -> bytes:
        """A binary ge.proto.ModelDef (what CANN's ge_ir.proto decodes; the contents of an .air file)."""
        return self.to_model_def().SerializeToString()

    def save(self, path: str) -> None:
        """Writes the ModelDef: binary for .air, protobuf text format for .pbtxt."""
        from graph_ir import serialize

        serialize.save(self, path)


# -- the verifier -----------------------------------------------------------------------------------------------------


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def verify_attrs(op: ir.IrOp, node: str, attrs: dict[str, Any]) -> dict[str, Any]:
    """The attrs with defaults filled in; an unknown attr, a missing required one or a wrong type is an error."""
    known = {a.name: a for a in op.attrs}
    for key in attrs:
        if key not in known:
            raise GraphError(f"{op.type} {node!r}: unknown attribute {key!r}; {op.type} has "
                             f"{', '.join(known) or 'no attributes'}")
    out = {}
    for a in op.attrs:
        if a.name not in attrs:
            if a.required:
                raise GraphError(f"{op.type} {node!r}: required attribute {a.name!r} ({a.type}) is missing")
            if a.default is None:
                continue
            value = a.default
        else:
            value = attrs[a.name]
        out[a.name] = _check_attr(op, node, a, value)
    return out


def _check_attr(op: ir.IrOp, node: str, a: ir.IrAttr, value: Any) -> Any:
    def bad(expected: str) -> GraphError:
        return GraphError(f"{op.type} {node!r}: attribute {a.name!r} must be {expected}, got {value!r} "
                          f"({type(value).__name__})")

    if a.type == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise bad("a bool")
        return bool(value)
    if a.type == "int":
        if not _is_int(value):
            raise bad("an int")
        return int(value)
    if a.type == "float":
        if not (_is_int(value) or isinstance(value, (float, np.floating))):
            raise bad("a float")
        return float(value)
    if a.type == "string":
        if not isinstance(value, str):
            raise bad("a str")
        return value
    if a.type == "type":
        try:
            return as_dtype(value)
        except TypeError:
            raise bad("a dtype") from None
    if a.type == "tensor":
        if not isinstance(value, np.ndarray):
            raise bad("a NumPy array")
        as_dtype(value.dtype)
        return value
    if a.type == "list_int":
        if not all(_is_int(v) for v in value):
            raise bad("a list of ints")
        return [int(v) for v in value]
    raise AssertionError(a.type)


def verify_inputs(op: ir.IrOp, node: str, inputs: Sequence[Handle | None]) -> None:
    """Arity, dtypes against the IR lists, and the op's shared-dtype, shared-shape and scalar constraints."""
    if op.inputs and op.inputs[-1].dynamic:
        pairs = [(f"{op.inputs[-1].name}[{k}]", op.inputs[-1], h) for k, h in enumerate(inputs)]
        if any(h is None for h in inputs):
            raise GraphError(f"{op.type} {node!r}: a dynamic input cannot be None")
    else:
        if len(inputs) > len(op.inputs):
            raise GraphError(f"{op.type} {node!r}: takes {len(op.inputs)} inputs "
                             f"({', '.join(i.name for i in op.inputs) or 'none'}), got {len(inputs)}")
        padded = list(inputs) + [None] * (len(op.inputs) - len(inputs))
        pairs = [(i.name, i, h) for i, h in zip(op.inputs, padded)]
        for name, spec, h in pairs:
            if h is None and not spec.optional:
                raise GraphError(f"{op.type} {node!r}: required input {name!r} is missing "
                                 f"(inputs in IR order: {', '.join(i.name for i in op.inputs)})")
    for name, spec, h in pairs:
        if h is None:
            continue
        if h.dtype.name not in spec.dtypes:
            raise GraphError(f"{op.type} {node!r}: input {name!r} has dtype {h.dtype}, expected one of "
                             f"{', '.join(spec.dtypes)}")
        if spec.scalar and h.shape not in ((), (1,)):
            raise GraphError(f"{op.type} {node!r}: input {name!r} must be a scalar of shape [] or [1], got shape "
                             f"{list(h.shape)}")
    given = {name: h for name, _, h in pairs if h is not None}
    group = [n for n in op.same_dtype if n in given]
    for n in group[1:]:
        if given[n].dtype != given[group[0]].dtype:
            raise GraphError(f"{op.type} {node!r}: input {n!r} has dtype {given[n].dtype} but {group[0]!r} has "
                             f"{given[group[0]].dtype}; {', '.join(op.same_dtype)} share one dtype")
    group = [n for n in op.same_shape if n in given]
    for n in group[1:]:
        if given[n].shape != given[group[0]].shape:
            raise GraphError(f"{op.type} {node!r}: input {n!r} has shape {list(given[n].shape)} but {group[0]!r} "
                             f"has {list(given[group[0]].shape)}; {', '.join(op.same_shape)} share one shape")


def infer_outputs(op: ir.IrOp, node: str, inputs: Sequence[Handle | None], attrs: dict[str, Any]) -> list[TensorDesc]:
    """Output descs: ref outputs alias their input's desc; Const/Variable follow `value`; Cast and Reshape their
    attributes and inputs; Identity its input."""
    out_names = [o.name for o in op.outputs]
    if op.type in ("Const", "Variable"):
        value = attrs.get("value")
        if value is None:
            raise GraphError(f"{op.type} {node!r}: attribute 'value' (a NumPy array) is needed to know its dtype "
                             "and shape")
        return [TensorDesc("y", as_dtype(value.dtype), tuple(value.shape))]
    if op.type == "Identity":
        return [inputs[0].desc.renamed("y")]
    if op.type == "Cast":
        return [TensorDesc("y", attrs["dst_type"], inputs[0].shape)]
    if op.type == "Reshape":
        shape_node = inputs[1].node
        if shape_node.type != "Const":
            raise GraphError(f"Reshape {node!r}: input 'shape' must be a Const, got {shape_node.type}")
        shape = [int(d) for d in np.asarray(shape_node.attrs["value"]).reshape(-1)]
        x = inputs[0]
        if -1 in shape:
            known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
            shape[shape.index(-1)] = x.desc.num_elements // max(known, 1)
        if int(np.prod(shape, dtype=np.int64)) != x.desc.num_elements:
            raise GraphError(f"Reshape {node!r}: cannot reshape {list(x.shape)} to {shape}")
        return [TensorDesc("y", x.dtype, tuple(shape))]
    refs = op.refs
    if len(refs) == len(op.outputs):
        return [inputs[refs[k]].desc.renamed(out_names[k]) for k in range(len(op.outputs))]
    if not op.outputs:
        return []
    raise GraphError(f"{op.type} {node!r}: cannot infer its outputs; pass output_descs")


# -- the builders of the graph inputs and constants -------------------------------------------------------------------


def _shape(shape) -> tuple[int, ...]:
    if shape is None:
        return ()
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise GraphError(f"shape {list(shape)} must have non-negative dims")
    return dims


def Data(index: int = 0, dtype: Any = "float32", shape: Any = (8,), *, name: str | None = None,
         ref: bool = False) -> Handle:
    """A graph input fed by position `index` of run_graph's inputs (RefData when `ref`: written in place)."""
    graph = default_graph()
    if not _is_int(index) or index < 0:
        raise GraphError(f"Data: index must be an int >= 0, got {index!r}")
    for other in graph.nodes_of_type("Data") + graph.nodes_of_type("RefData"):
        if other.attrs["index"] == index:
            raise GraphError(f"Data: index {index} is already fed to node {other.name!r}")
    dt = as_dtype(dtype)
    desc = TensorDesc("y", dt, _shape(shape))
    op_type = "RefData" if ref else "Data"
    return graph.add_node(op_type, (), {"index": int(index)}, name=name or f"{op_type.lower()}{index}",
                          output_descs=[desc]).output(0)


def Const(value: Any, dtype: Any = None, *, name: str | None = None) -> Handle:
    """A constant. Python numbers become arrays of shape [] (the lowering uses [1] for TF scalars)."""
    array = np.array(value, dtype=as_dtype(dtype).numpy if dtype is not None else None)
    if dtype is None and array.dtype == np.float64 and not isinstance(value, np.ndarray):
        array = array.astype(np.float32)  # a Python float is float32, as in TF
    as_dtype(array.dtype)
    return default_graph().add_node("Const", (), {"value": np.ascontiguousarray(array)}, name=name).output(0)


def Variable(name: str, value: Any, *, index: int = 0) -> Handle:
    """Session-held state named `name` (shared by name across the graphs of a session), initialized from `value`
    when a session first sees it. The node is named exactly `name`."""
    if not isinstance(name, str) or not name or ":" in name:
        raise GraphError(f"Variable: name must be a non-empty str without ':', got {name!r}")
    array = np.ascontiguousarray(np.array(value))
    as_dtype(array.dtype)
    attrs = {"value": array, "index": int(index), "shared_name": name}
    return default_graph().add_node("Variable", (), attrs, name=name, exact_name=True).output(0)


def to_handle(value: Any, dtype: DType, scalar: bool) -> Handle:
    """A handle for a builder argument: handles pass through; numbers and arrays become a Const of `dtype` (shape [1]
    for scalar inputs, the scalar policy of this package)."""
    if isinstance(value, Handle):
        return value
    array = np.asarray(value, dtype=dtype.numpy)
    if scalar and array.shape == ():
        array = array.reshape(1)
    return Const(array)
