"""Removing what no node reads from a graph: Consts left behind by constant folding, and (graph_ir.lowering) the reads
of learning-rate variables frozen into attributes, with the variables themselves."""

from __future__ import annotations

from typing import Any

from graph_ir.ir.nodes import Node


def remove_unread(graph: Any, types: tuple[str, ...], variables: set[str] = frozenset()) -> None:
    """Removes from graph_ir.Graph `graph` the nodes of `types` (pure ones: Consts left behind by constant folding,
    reads) that no node reads, data or control, and the graph does not return, again until none is left, so that an
    unread chain goes whole. The Variables named in `variables` (frozen into attributes) go with the reads that only feed them
    forward, even where control edges name those reads (tf.function orders every read before its end): a
    control reader then waits for what the removed node waited for instead."""
    chain = set(variables) & set(graph.nodes)
    for node in graph.topological_order() if chain else ():
        if node.type in types and any(h is not None and h.node.name in chain for h in node.inputs):
            chain.add(node.name)
    while True:
        data_read = {h.node.name for n in graph.nodes.values() for h in n.inputs if h is not None}
        data_read |= {h.node.name for h in graph.outputs}
        control_read = {c.name for n in graph.nodes.values() for c in n.control_inputs}
        unread = [n for n in graph.nodes.values() if n.name not in data_read and
                  (n.name in chain or (n.type in types and n.name not in control_read))]
        if not unread:
            return
        for node in unread:
            _remove_passing_controls(graph, node)


def _remove_passing_controls(graph: Any, node: Node) -> None:
    """Removes `node`, which nothing reads as data; its control readers wait for its inputs instead."""
    before = [h.node for h in node.inputs if h is not None] + list(node.control_inputs)
    del graph.nodes[node.name]
    for reader in graph.nodes.values():
        if any(c is node for c in reader.control_inputs):
            kept = [c for c in reader.control_inputs if c is not node]
            reader.control_inputs = kept + [c for c in before if all(k is not c for k in kept)]
