"""Where the values of a Session's run live (graph_ir/runtime/session.py's planner), and which snapshots must copy.

A snapshot (Identity, IdentityN) of a writable buffer (a Variable, RefData or Data input) must hold the values the
buffer had when the snapshot ran. It copies only when an in-place op writes that buffer while the snapshot, or a
view of it, is still to be read; otherwise it reads the same values as a copy would, and stays a view (a training
step reads each weight through an Identity: copying them all would copy the model every step)."""

from __future__ import annotations

from graph_ir.executors import ALIASING, EXECUTORS, SNAPSHOTS
from graph_ir.executors import control as control_flow
from graph_ir.ir.errors import GraphError
from graph_ir.ir.graph import Graph
from graph_ir.ir.nodes import Node
from graph_ir.ir.registry import WRITABLE_SOURCES

SOURCES = ("Data", "RefData", "Variable", "Const", "NetOutput")


def value_storage(graph: Graph, order: list[Node], position: dict[str, int], copies) -> tuple:
    """Where each value lives: (value -> its buffer, the buffers an in-place op may write, the buffers the run
    allocates -> bytes, the graph's own data in bytes, value -> the position of its last reader). A snapshot output
    (Identity, IdentityN) of a writable buffer is a buffer of its own where copies(key), else a view of its source."""
    storage: dict[tuple[str, int], tuple[str, int]] = {}  # a value -> the buffer it lives in
    mutable: set[tuple[str, int]] = set()  # buffers an in-place op may write
    sizes: dict[tuple[str, int], int] = {}  # buffers this run allocates -> bytes
    last_use: dict[tuple[str, int], int] = {}
    graph_bytes = 0
    for node in order:
        if node.type not in EXECUTORS and node.type not in SOURCES and node.type not in control_flow.FUNCTIONAL:
            raise GraphError(f"the session cannot execute {node.type} (node {node.name!r})")
        for k, desc in enumerate(node.output_descs):
            key = (node.name, k)
            if any(d < 0 for d in desc.shape):
                raise GraphError(f"{node.type} {node.name!r}: output {k} has shape {list(desc.shape)}; a run needs "
                                 f"dims >= 0")
            if node.type in WRITABLE_SOURCES or node.type == "Const":
                storage[key] = key
                graph_bytes += desc.nbytes
                if node.type in WRITABLE_SOURCES:
                    mutable.add(key)
                if node.type == "Data":
                    sizes[key] = desc.nbytes
            elif node.op.refs and k in node.op.refs:
                storage[key] = storage[(node.inputs[node.op.refs[k]].node.name, node.inputs[node.op.refs[k]].index)]
            elif node.type in ALIASING:
                h = node.inputs[k if node.type == "IdentityN" else 0]
                source = storage[(h.node.name, h.index)]
                if node.type in SNAPSHOTS and source in mutable and copies(key):
                    storage[key] = key
                    sizes[key] = desc.nbytes
                else:
                    storage[key] = source
            else:  # a new array
                storage[key] = key
                sizes[key] = desc.nbytes
        for h in node.inputs:
            if h is not None:
                last_use[(h.node.name, h.index)] = position[node.name]
    return storage, mutable, sizes, graph_bytes, last_use


def snapshots_to_copy(graph: Graph, order: list[Node], position: dict[str, int],
                       storage: dict[tuple[str, int], tuple[str, int]],
                       last_use: dict[tuple[str, int], int]) -> set[tuple[str, int]]:
    """The snapshot outputs that must copy: those whose source buffer an in-place op (a ref output, or any
    functional node, whose subgraphs may write the session's Variables) writes after the snapshot and no later than
    its last reader, or that of a view of it (Reshape, ExpandDims, Squeeze, another Identity). Every other snapshot
    reads the same values as a copy would, so it stays a view (`storage`, `last_use`: with no snapshot copied)."""
    writable = {key for key in storage.values() if graph.nodes[key[0]].type in WRITABLE_SOURCES}
    origin: dict[tuple[str, int], tuple[str, int]] = {}  # a view -> the nearest snapshot it reads through
    reach: dict[tuple[str, int], int] = {}  # a snapshot -> the last position its values (or views) are read
    writes: dict[tuple[str, int], list[int]] = {}  # a writable buffer -> the positions that write it
    everything: list[int] = []  # functional nodes: they may write any writable buffer
    for node in order:
        p = position[node.name]
        if node.subgraph_graphs:
            everything.append(p)
        for k in range(len(node.output_descs)):
            key = (node.name, k)
            if node.op.refs and k in node.op.refs:
                h = node.inputs[node.op.refs[k]]
                writes.setdefault(storage[(h.node.name, h.index)], []).append(p)
            elif node.type in ALIASING:
                h = node.inputs[k if node.type == "IdentityN" else 0]
                source = (h.node.name, h.index)
                if node.type in SNAPSHOTS and storage[key] in writable:
                    origin[key] = key
                elif source in origin:
                    origin[key] = origin[source]
            if key in origin:
                snap = origin[key]
                reach[snap] = max(reach.get(snap, p), last_use.get(key, p))
    if graph.parent_node is not None:  # a subgraph returns its values uncopied to a node the outer graph's plan
        return set(reach)  # takes for a new array: its snapshots copy, as the outer run may write their source
    copies = set()
    for snap, last in reach.items():
        start = position[snap[0]]
        if any(start < w <= last for w in (*writes.get(storage[snap], ()), *everything)):
            copies.add(snap)
    return copies
