"""`Graph`: the nodes of one GE graph, added through the verifier, with unique names, a topological order and the
NetOutput. Inside ``with graph:`` the builders (graph_ir/ir/builders.py, graph_ir.ops) add nodes to it (a thread-local
stack, as torchair's GeGraph).

Names are unique within a graph: a taken name gets a ``_1``, ``_2``... suffix (one dict look-up per name, so
building stays linear). "NetOutput" is reserved for the graph's output node. Control edges are kept per node and
written as ``name:-1`` when serialized.

Control flow (graph_ir/opset/control.py): a functional node (If, Case, While) holds its subgraphs, complete Graphs
of their own (Data parameters, a NetOutput). Each graph's `subgraphs` maps the names of every subgraph nested below
it (flattened, as GE's ModelDef lists them) to the Graph; names are unique in the whole model (a taken name gets a
``_1``... suffix when attached), a subgraph belongs to one node, no graph is nested in itself, and nesting stays
within control.MAX_SUBGRAPH_DEPTH.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

from graph_ir import opset  # noqa: F401 (opset registers the families)
from graph_ir.files import onnx_dump, serialize
from graph_ir.ir import nesting, pruning, registry
from graph_ir.ir.errors import GraphError
from graph_ir.ir.frozen import frozen_message
from graph_ir.ir.nodes import Handle, Node, TensorDesc
from graph_ir.ir.output_rules import infer_outputs
from graph_ir.ir.verify import check_list_count, verify_attrs, verify_inputs

NET_OUTPUT = "NetOutput"  # the reserved name (and type) of the output node

_STACK = threading.local()


def default_graph() -> Graph:
    stack = getattr(_STACK, "graphs", [])
    if not stack:
        raise GraphError("no graph: build nodes inside `with graph_ir.Graph(name) as graph:`")
    return stack[-1]


class Graph:
    """A GE graph (one GraphDef of a ModelDef). Use ``with graph:`` to add nodes with the builders."""

    def __init__(self, name: str = "graph"):
        if not isinstance(name, str):
            raise GraphError(f"Graph: name must be a str, got {type(name).__name__}")
        self.name = name
        self.nodes: dict[str, Node] = {}
        self.outputs: list[Handle] = []
        self._next_suffix: dict[str, int] = {}
        self._variable_names: dict[int, str] = {}  # id(TF variable) -> GE Variable name (from_tensorflow)
        self._flat_parts: dict[int, list[tuple[str, int, tuple[int, ...]]]] = {}  # id(flat TF variable) -> parts
        # Learning-rate variables from_tensorflow froze into ApplyFusedEmaAdam's lr attribute (their current values),
        # left out of the graph: GE name -> the optimizer nodes that took the value.
        self.frozen_variables: dict[str, list[str]] = {}
        self.subgraphs: dict[str, Graph] = {}  # every subgraph nested below this graph, by its unique name
        self.parent_node: Node | None = None  # the functional node this graph is a subgraph of
        self.parent_graph: Graph | None = None  # the graph holding parent_node
        self._next_graph_suffix: dict[str, int] = {}  # the next suffix to try for a taken subgraph name

    def __enter__(self) -> Graph:  # noqa: PYI034 (typing.Self needs Python 3.11; we support 3.10)
        _STACK.graphs = [*getattr(_STACK, "graphs", []), self]
        return self

    def __exit__(self, *exc) -> None:
        _STACK.graphs.pop()

    def __repr__(self) -> str:
        return f"<graph_ir.Graph {self.name!r}: {len(self.nodes)} nodes>"

    # -- building -------------------------------------------------------------------------------------------------

    def unique_name(self, base: str) -> str:
        """`base`, or `base_k` with the smallest k not yet taken after the last one handed out."""
        if base not in self.nodes and base != NET_OUTPUT:
            return base
        k = self._next_suffix.get(base, 1)
        while f"{base}_{k}" in self.nodes:
            k += 1
        self._next_suffix[base] = k + 1
        return f"{base}_{k}"

    def add_node(self, op_type: str, inputs: Sequence[Handle | None] = (), attrs: dict[str, Any] | None = None,
                 *, name: str | None = None, control_inputs: Iterable[Handle | Node] = (),
                 output_descs: list[TensorDesc] | None = None, exact_name: bool = False,
                 subgraphs: Sequence[Graph] = ()) -> Node:
        """Adds a node after checking it against its IR prototype; returns it. `output_descs` are needed only for
        the graph inputs (Data/RefData), whose dtype and shape cannot be inferred; given for others, they are
        checked against the inferred ones. A functional op (If, Case, While) takes its `subgraphs` in IR order;
        its outputs are inferred from them (graph_ir/opset/control.py)."""
        op = registry.get(op_type, node=name)
        if name is not None and (not isinstance(name, str) or not name or ":" in name):
            raise GraphError(f"{op_type}: a node name must be a non-empty str without ':', got {name!r}")
        node_name = name or op_type
        if node_name == NET_OUTPUT and op_type != NET_OUTPUT and exact_name:
            raise GraphError(f"{op_type} node: the name {NET_OUTPUT!r} is reserved for the graph's output node")
        if exact_name and node_name in self.nodes:
            raise GraphError(f"a node named {node_name!r} already exists in graph {self.name!r}")
        if op_type == NET_OUTPUT and NET_OUTPUT in self.nodes:
            raise GraphError(f"graph {self.name!r} already has a {NET_OUTPUT} node; a graph has one output node")
        node_name = NET_OUTPUT if op_type == NET_OUTPUT else self.unique_name(node_name)
        inputs = list(inputs)
        for h in inputs:
            if h is not None and (not isinstance(h, Handle) or self.nodes.get(h.node.name) is not h.node):
                raise GraphError(f"{op_type} {node_name!r}: input {h!r} is not an output of a node of graph "
                                 f"{self.name!r}")
            if h is not None and not 0 <= h.index < len(h.node.output_descs):
                raise GraphError(f"{op_type} {node_name!r}: input {h.node.name}:{h.index} does not exist; "
                                 f"{h.node.type} {h.node.name!r} has {len(h.node.output_descs)} outputs")
        controls = [c.node if isinstance(c, Handle) else c for c in control_inputs]
        for c in controls:
            if not isinstance(c, Node) or self.nodes.get(c.name) is not c:
                raise GraphError(f"{op_type} {node_name!r}: control input {c!r} is not a node of graph {self.name!r}")
        full_attrs = verify_attrs(op, node_name, attrs or {})
        verify_inputs(op, node_name, inputs)
        check_list_count(op, node_name, inputs, full_attrs)
        graphs = list(subgraphs)
        if graphs or op.graphs:
            nesting.check_new_subgraphs(self, op, node_name, graphs, Graph)
            descs = nesting.functional_outputs(op, node_name, inputs, graphs, output_descs)
        else:
            descs = infer_outputs(op, node_name, inputs, full_attrs, output_descs)
        node = Node(node_name, op, inputs, full_attrs, descs, controls, graphs)
        self.nodes[node_name] = node
        if graphs:
            nesting.attach(self, node, graphs)
        return node

    # -- subgraphs ------------------------------------------------------------------------------------------------

    @property
    def root(self) -> Graph:
        """The outermost graph this graph is nested in (itself when it is not a subgraph)."""
        graph = self
        while graph.parent_graph is not None:
            graph = graph.parent_graph
        return graph

    def _depth(self) -> int:
        depth, graph = 0, self
        while graph.parent_graph is not None:
            depth, graph = depth + 1, graph.parent_graph
        return depth

    def _height(self) -> int:
        """How many levels of subgraphs nest below this graph (0 without functional nodes)."""
        return max((1 + g._height() for n in self.nodes.values() for g in n.subgraph_graphs), default=0)

    def set_outputs(self, handles: Sequence[Handle], control_inputs: Iterable[Handle | Node] = ()) -> Node:
        """Sets the NetOutput node: its inputs are what run_graph returns, in order. Ops with side effects that are
        not returned should be listed in control_inputs (or are kept anyway: nothing is pruned here)."""
        old = self.nodes.pop(NET_OUTPUT, None)
        try:
            node = self.add_node(NET_OUTPUT, list(handles), control_inputs=control_inputs)
        except Exception:
            if old is not None:
                self.nodes[NET_OUTPUT] = old
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

    def variable_name(self, variable: Any) -> str:
        """The GE Variable name of a TF or Keras variable that graph_ir.from_tensorflow captured in this graph."""
        for candidate in (variable, getattr(variable, "value", None)):
            name = self._variable_names.get(id(candidate))
            if name in self.frozen_variables:
                raise KeyError(frozen_message(name, self.frozen_variables[name]))
            if name is not None:
                return name
        raise KeyError(f"graph {self.name!r} captured no variable {getattr(variable, 'name', variable)!r}")

    def flat_state_parts(self, variable: Any) -> list[tuple[str, int, tuple[int, ...]]]:
        """The GE Variables a flat optimizer-state variable (e.g. FusedEmaAdam's ``m_float32``) was split into by
        from_tensorflow: (GE name, offset in the flat variable, shape), one per model variable, in offset order."""
        for candidate in (variable, getattr(variable, "value", None)):
            if id(candidate) in self._flat_parts:
                return sorted(self._flat_parts[id(candidate)], key=lambda part: part[1])
        raise KeyError(f"graph {self.name!r} split no flat state variable {getattr(variable, 'name', variable)!r}")

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
        """Re-checks every node (of the subgraphs too, and that each functional node's outputs are still what its
        subgraphs return) and that every graph is acyclic."""
        for graph in (self, *self.subgraphs.values()):
            for node in graph.nodes.values():
                verify_attrs(node.op, node.name, node.attrs)
                verify_inputs(node.op, node.name, node.inputs)
                check_list_count(node.op, node.name, node.inputs, node.attrs)
            graph.topological_order()
        self._check_functional_nodes()

    def _check_functional_nodes(self) -> None:
        """Each functional node's outputs are still what its subgraphs return (a subgraph may have been edited
        after it was attached)."""
        for graph in (self, *self.subgraphs.values()):
            for node in graph.nodes.values():
                if node.subgraph_graphs:
                    nesting.functional_outputs(node.op, node.name, node.inputs, node.subgraph_graphs,
                                               node.output_descs)

    def remove_last(self, node: Node) -> None:
        """Removes `node`, the node added last, which nothing reads yet (the lowering's constant folding replaces
        such nodes by Consts)."""
        if next(reversed(self.nodes)) != node.name or self.nodes[node.name] is not node:
            raise GraphError(f"remove_last: {node.name!r} is not the last node added to graph {self.name!r}")
        del self.nodes[node.name]
        if node.subgraph_graphs:
            nesting.detach(self, node)

    def remove_unread(self, types: tuple[str, ...], variables: set[str] = frozenset()) -> None:
        """Removes unread nodes of `types` and the unread Variables named in `variables` (graph_ir/ir/pruning.py)."""
        pruning.remove_unread(self, types, variables)

    # -- serialization --------------------------------------------------------------------------------------------

    def to_model_def(self):
        """The graph as a ge.proto.ModelDef: graph[0] is this graph, then every subgraph (flattened, in the order of
        `subgraphs`), each with its parent node's type and its position among that node's subgraphs."""
        if self.parent_node is not None:
            raise GraphError(f"graph {self.name!r} is a subgraph of node {self.parent_node.name!r}; serialize its root "
                             f"graph {self.root.name!r}")
        self._check_functional_nodes()
        subgraphs = [(g.name, g.topological_order(), g.parent_node.type, g.parent_node.subgraph_graphs.index(g))
                     for g in self.subgraphs.values()]
        return serialize.to_model_def(self.name, self.topological_order(), subgraphs)

    def serialize(self) -> bytes:
        """A binary ge.proto.ModelDef (what CANN's ge_ir.proto decodes; the contents of an .air file)."""
        return self.to_model_def().SerializeToString()

    def save(self, path: str) -> None:
        """Writes the ModelDef: binary for .air, protobuf text format for .pbtxt; or, for .onnx (.onnx.pbtxt), GE's
        ONNX-format graph dump, which Netron opens (graph_ir/files/onnx_dump.py; needs the onnx package)."""
        if path.endswith((".onnx", ".onnx.pbtxt")):
            onnx_dump.write(self.to_model_def(), path)
        else:
            serialize.write(self.to_model_def(), path)
