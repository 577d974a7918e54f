"""A run's plan for graph_ir.Session: the order nodes run in, which Identity snapshots copy, when values die, and the
peak memory of a run, checked against the session's bound (graph_ir/runtime/session.py states the rules)."""

from __future__ import annotations

from dataclasses import dataclass, field

from graph_ir.executors import WORKSPACE
from graph_ir.executors import control as control_flow
from graph_ir.executors.plan_steps import Step, resolve_steps
from graph_ir.ir.errors import GraphError
from graph_ir.ir.graph import Graph
from graph_ir.ir.nodes import Node
from graph_ir.runtime.snapshots import snapshots_to_copy, value_storage

BASE_RUN_BYTES = 256 * 2**20
GRAPH_DATA_FACTOR = 4


@dataclass
class Plan:
    graph: Graph
    order: list[Node]
    fed: list[Node]  # Data and RefData nodes
    snapshot: set[tuple[str, int]]  # snapshot outputs (Identity, IdentityN) that must copy their source
    drop_after: list[list[tuple[str, int]]]  # values no later node reads, per position
    peak_bytes: int
    subplans: dict[str, control_flow.Subplan] = field(default_factory=dict)  # every subgraph's, shared
    steps: list[Step] = field(default_factory=list)  # order, resolved for the run loop
    slots: int = 0  # how many value slots a run uses


def plan(graph: Graph, limit: int | None, subplans: dict[str, control_flow.Subplan] | None = None) -> Plan:
    """The run order, which Identities copy, when values die, and the peak memory of a run (checked against the
    bound)."""
    if subplans is None:  # the root graph: its subgraphs first (a subgraph's own bound is its root's)
        subplans = control_flow.plan_subgraphs(graph, lambda sub, plans: plan(sub, 2**63, plans))
    order = graph.topological_order()
    fed_nodes = [n for n in order if n.type in ("Data", "RefData")]
    fed: dict[int, str] = {}
    for node in fed_nodes:
        other = fed.setdefault(node.attrs["index"], node.name)
        if other != node.name:
            raise GraphError(f"graph {graph.name!r}: nodes {other!r} and {node.name!r} are both fed input "
                             f"{node.attrs['index']}; each input index feeds one Data node")
    position = {n.name: k for k, n in enumerate(order)}
    # First as if no snapshot copied: which snapshots must copy (their source written while they are still read).
    storage, _, _, _, last_use = value_storage(graph, order, position, lambda key: False)
    copies = snapshots_to_copy(graph, order, position, storage, last_use)
    storage, _, sizes, graph_bytes, last_use = value_storage(graph, order, position, copies.__contains__)
    snapshot = {key for key in copies if storage[key] == key}
    drop_after: list[list[tuple[str, int]]] = [[] for _ in order]
    for key, k in last_use.items():
        drop_after[k].append(key)
    # Peak: buffers allocated so far and not yet dead (a buffer dies with the last value living in it).
    buffer_death: dict[tuple[str, int], int] = {}
    for key, buf in storage.items():
        buffer_death[buf] = max(buffer_death.get(buf, -1), last_use.get(key, position[key[0]]))
    freed_at: dict[int, int] = {}
    for buf, size in sizes.items():
        freed_at[buffer_death[buf]] = freed_at.get(buffer_death[buf], 0) + size
    live = peak = 0
    peak_at = (None, 0, 0)  # the node where the peak falls, its outputs and its working memory
    for k, node in enumerate(order):
        made = sum(sizes.get((node.name, j), 0) for j in range(len(node.output_descs)))
        if node.type == "NetOutput":  # the returned copies, one per distinct buffer
            made += sum(_nbytes(graph, b) for b in {storage[(h.node.name, h.index)] for h in node.inputs})
        work = control_flow.workspace(node, subplans) if node.subgraph_graphs else _workspace(node)
        live += made
        if live + work > peak:
            peak, peak_at = live + work, (node, made, work)
        live -= freed_at.get(k, 0)
    bound = limit if limit is not None else BASE_RUN_BYTES + GRAPH_DATA_FACTOR * graph_bytes
    if peak > bound:
        node, made, work = peak_at
        raise GraphError(f"graph {graph.name!r}: a run would hold {peak} bytes, above this session's bound of {bound} "
                         f"bytes, at node {node.name!r} ({node.type}: {made} bytes of outputs and {work} bytes of "
                         f"working memory, beside {peak - made - work} bytes of live values); pass "
                         f"graph_ir.Session(max_run_bytes=...) to allow more")
    steps, slots = resolve_steps(order, snapshot, drop_after)
    return Plan(graph, order, fed_nodes, snapshot, drop_after, peak, subplans, steps, slots)


def _workspace(node: Node) -> int:
    """The working memory node's executor holds while it runs (graph_ir.executors.WORKSPACE; 0 if not listed)."""
    rule = WORKSPACE.get(node.type)
    return 0 if rule is None else max(int(rule(node)), 0)


def _nbytes(graph: Graph, key: tuple[str, int]) -> int:
    return graph.nodes[key[0]].output_descs[key[1]].nbytes
