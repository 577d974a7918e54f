"""The bookkeeping of subgraphs for graph_ir/ir/graph.py: a functional node (If, Case, While) holds its subgraphs,
complete Graphs of their own; names are unique in the whole model, a subgraph belongs to one node, no graph is
nested in itself, and nesting stays within control.MAX_SUBGRAPH_DEPTH (graph_ir/opset/control.py has the ops'
rules)."""

from __future__ import annotations

from typing import Any

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Handle, Node, TensorDesc
from graph_ir.ir.registry import IrOp
from graph_ir.opset import control


def check_new_subgraphs(graph: Any, op: IrOp, node: str, graphs: list[Any], graph_type: type) -> None:
    """The subgraphs given to a new node of `op` in `graph`: their count, type, owner, and nesting depth."""
    if not op.graphs:
        raise GraphError(f"{op.type} {node!r}: takes no subgraphs, got {len(graphs)}")
    control.check_subgraph_count(op, node, len(graphs))
    ancestors = []
    holder: Any = graph
    while holder is not None:
        ancestors.append(holder)
        holder = holder.parent_graph
    for k, g in enumerate(graphs):
        role = control.subgraph_role(op, k)
        if not isinstance(g, graph_type):
            raise GraphError(f"{op.type} {node!r}: subgraph {role} must be a graph_ir.Graph, got "
                             f"{type(g).__name__}")
        if any(g is a for a in ancestors) or any(g is other for other in graphs[:k]):
            raise GraphError(f"{op.type} {node!r}: subgraph {role} ({g.name!r}) would be nested in itself "
                             f"(recursion) or given twice; each subgraph is a graph of its own")
        if g.parent_node is not None:
            raise GraphError(f"{op.type} {node!r}: subgraph {role} ({g.name!r}) is already the subgraph of node "
                             f"{g.parent_node.name!r} in graph {g.parent_graph.name!r}; a subgraph belongs to "
                             "one node")
        depth = len(ancestors) + g._height()
        if depth > control.MAX_SUBGRAPH_DEPTH:
            raise GraphError(f"{op.type} {node!r}: subgraph {role} ({g.name!r}) would nest subgraphs {depth} "
                             f"deep; at most {control.MAX_SUBGRAPH_DEPTH} levels are allowed")


def functional_outputs(op: IrOp, node: str, inputs: list[Handle | None], graphs: list[Any],
                       given: list[TensorDesc] | None) -> list[TensorDesc]:
    """The functional node's output descs from its subgraphs, checked against the `given` ones (a file's)."""
    inferred = control.infer_functional(op, node, inputs, graphs, given)
    if given is not None:
        have = [(d.dtype, d.shape) for d in given]
        if have != [(d.dtype, d.shape) for d in inferred]:
            raise GraphError(f"{op.type} {node!r}: output_desc says {[f'{d}{list(s)}' for d, s in have]}, but its "
                             f"subgraphs return {[f'{d.dtype}{list(d.shape)}' for d in inferred]}")
    return inferred


def attach(graph: Any, node: Node, graphs: list[Any]) -> None:
    """Makes `graphs` (and the subgraphs nested in them) subgraphs of `node`, registered under names unique in
    the whole model, in this graph and every graph it is nested in."""
    top = graph.root
    incoming = [x for g in graphs for x in (g, *g.subgraphs.values())]
    added: set[str] = set()  # (dict look-ups only, so attaching many subgraphs stays linear)
    for g in incoming:
        base = g.name
        k = top._next_graph_suffix.get(base, 1)  # (as unique_name: no rescan of the suffixes handed out)
        while g.name == top.name or g.name in top.subgraphs or g.name in added:
            g.name, k = f"{base}_{k}", k + 1
        if g.name != base:
            top._next_graph_suffix[base] = k
        added.add(g.name)
    for g in incoming:  # a renamed nested graph changes the keys of the graphs holding it
        g.subgraphs = {x.name: x for x in g.subgraphs.values()}
    for g in graphs:
        g.parent_node, g.parent_graph = node, graph
    holder: Any = graph
    while holder is not None:
        holder.subgraphs.update((g.name, g) for g in incoming)
        holder = holder.parent_graph


def detach(graph: Any, node: Node) -> None:
    """Undoes attach for a node being removed."""
    leaving = {id(x) for g in node.subgraph_graphs for x in (g, *g.subgraphs.values())}
    holder: Any = graph
    while holder is not None:
        holder.subgraphs = {n: g for n, g in holder.subgraphs.items() if id(g) not in leaving}
        holder = holder.parent_graph
    for g in node.subgraph_graphs:
        g.parent_node = g.parent_graph = None
