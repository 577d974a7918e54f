"""How graph_ir.Session runs the functional ops (If, StatelessIf, Case, StatelessCase, While, StatelessWhile;
prototypes and rules in graph_ir/opset/control.py): each subgraph is planned once by the session's own planner, and
a functional node runs its subgraphs through the session, feeding their Data nodes by index.

- If runs then_branch when cond is true, else else_branch; Case runs branches[branch_index], the last branch when
  branch_index is out of range; the truth of a value is TF's (a rank-0 value: non-zero; otherwise: non-empty).
- While evaluates cond on the state, and while it holds replaces the state by body(state). One run executes at most
  the session's max_loop_iterations loop bodies, all While nodes (nested or successive) together, so nesting cannot
  multiply a run's time; one more is a GraphError naming the node, raised before that body runs. Memory per
  iteration is bounded: only the current state is held between iterations. Iterations run one after another
  (`parallel_iterations` is kept in the graph; it cannot change a result).
- Work is bounded too: each iteration charges its cond's and body's work (Subplan.work: every node's output elements
  plus NODE_WORK elements for running it, an If's or Case's largest branch included; a nested While charges its own
  iterations) to the run's max_loop_work elements, all While nodes together; an iteration that would exceed it is a
  GraphError naming the node and what the run spent, raised before its body runs. What TensorLists copy beyond
  their nodes' outputs (graph_ir/executors/list_store.py WORK) is charged after the body that copied. The default,
  DEFAULT_MAX_LOOP_WORK, is ~1 s of NumPy work: a trivial While(true) stops after ~10**5 bodies, a loop over a
  16 MiB state after ~100, while the test suite's real models use under 1% of it (its loop tests up to 12%).
- Values cross the subgraph boundary without copies, except where a later in-place write could change one: a
  subgraph that (or a subgraph nested in it that) writes a buffer in place gets copies of its inputs; a result
  living in a Variable or RefData buffer is copied; a functional node's output that shares memory with one of its
  inputs is copied.
- A run that fails part-way (an exceeded loop bound, an executor's error) leaves the Variables as the nodes that
  ran before the error wrote them, loop iterations included, as a failed GE execution leaves device memory: nothing
  is rolled back.

The planner adds a functional node's working memory at its position: the largest peak of its subgraphs, plus the
loop state for a While (held beside the body's run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from graph_ir.executors import ALIASING, SNAPSHOTS, list_store
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Node
from graph_ir.ir.verify import is_int
from graph_ir.opset.control import CASE_OPS, FUNCTIONAL, IF_OPS, WHILE_OPS

__all__ = ["DEFAULT_MAX_LOOP_WORK", "FUNCTIONAL", "NODE_WORK", "Subplan", "execute", "plan_subgraphs", "truth",
           "workspace"]

_STATE_SOURCES = ("Variable", "RefData")
NODE_WORK = 1024  # elements charged for running one node: its dispatch costs ~1 us, as NumPy touching ~1000 elements
DEFAULT_MAX_LOOP_WORK = 2**30  # elements a run's loops may touch (Session(max_loop_work=...))


@dataclass
class Subplan:
    plan: Any  # the session's plan of the subgraph (its run order, value lifetimes, peak)
    feeds: list[tuple[str, int]]  # (Data node, index) pairs
    copy_feeds: bool  # the subgraph, or one nested in it, writes a buffer in place
    copy_results: list[bool]  # per NetOutput input: lives in a Variable or RefData buffer
    work: int = 0  # elements one run of the subgraph touches (nested While iterations charge themselves)


def truth(value: np.ndarray) -> bool:
    """TF's truth of a predicate (tensorflow/core/kernels/functional_ops.cc, ToBool): a rank-0 value is true when it
    is non-zero (NaN is non-zero), a value of another rank when it holds any element."""
    return bool(value != 0) if value.ndim == 0 else value.size > 0


def _writes_in_place(graph: Any) -> bool:
    return any(n.op.refs for g in (graph, *graph.subgraphs.values()) for n in g.nodes.values())


def _lives_in_state(node: Node, index: int) -> bool:
    """Whether output `index` of `node` is a Variable's or RefData's own buffer (through views and in-place ops)."""
    while True:
        if node.type in _STATE_SOURCES:
            return True
        if index in node.op.refs:
            h = node.inputs[node.op.refs[index]]
        elif node.type in ALIASING and node.type not in SNAPSHOTS:
            h = node.inputs[0]
        else:
            return False  # a new array, a Const, a Data (the parent's value), or a snapshot of a state buffer
        node, index = h.node, h.index


def plan_subgraphs(graph: Any, plan_one: Callable[..., Any]) -> dict[str, Subplan]:
    """Every subgraph of the root `graph` planned by `plan_one(subgraph, subplans)`, innermost first (a functional
    node's working memory needs its subgraphs' peaks), in one dict that every plan shares."""
    subplans: dict[str, Subplan] = {}
    for sub in sorted(graph.subgraphs.values(), key=lambda g: -g._depth()):
        plan = plan_one(sub, subplans)
        net = sub.nodes["NetOutput"]
        subplans[sub.name] = Subplan(plan, [(n.name, n.attrs["index"]) for n in plan.fed], _writes_in_place(sub),
                                     [_lives_in_state(h.node, h.index) for h in net.inputs],
                                     sum(_node_work(n, subplans) for n in sub.nodes.values()))
    return subplans


def _node_work(node: Node, subplans: dict[str, Subplan]) -> int:
    """The elements one run of `node` touches: its outputs, NODE_WORK for running it, and an If's or Case's largest
    branch (a While's iterations are charged as they run)."""
    work = NODE_WORK + sum(d.num_elements for d in node.output_descs)
    if node.subgraph_graphs and node.type not in WHILE_OPS:
        work += max(subplans[g.name].work for g in node.subgraph_graphs)
    return work


def check_budgets(max_loop_iterations: object, max_loop_work: object) -> None:
    """Refuses loop budgets Session cannot use, naming the argument."""
    for name, value in (("max_loop_iterations", max_loop_iterations), ("max_loop_work", max_loop_work)):
        if not is_int(value) or value < 0:
            raise TypeError(f"{name} must be an int >= 0, got {value!r}")


def reset_budgets(session: Any) -> None:
    """A new run's budgets: session.loop_budget loop bodies and session.work_budget elements of loop work."""
    session.loop_budget, session.work_budget = session.max_loop_iterations, session.max_loop_work


def workspace(node: Node, subplans: dict[str, Subplan]) -> int:
    """A functional node's working memory: its subgraphs' largest peak, plus the loop state for a While."""
    peak = max(subplans[g.name].plan.peak_bytes for g in node.subgraph_graphs)
    if node.type in WHILE_OPS:
        peak += sum(d.nbytes for d in node.output_descs)
    return peak


def _run_subgraph(session: Any, subplans: dict[str, Subplan], graph: Any, args: list[np.ndarray]) -> list[np.ndarray]:
    sub = subplans[graph.name]
    feeds = {name: np.array(args[index], copy=True) if sub.copy_feeds else args[index] for name, index in sub.feeds}
    results = session._run(sub.plan, feeds, copy_outputs=False)
    return [np.array(r, copy=True) if copy else r for r, copy in zip(results, sub.copy_results)]


def execute(session: Any, subplans: dict[str, Subplan], node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """Runs functional `node` on its input values `args` (in IR order); returns its outputs."""
    graphs = node.subgraph_graphs
    if node.type in IF_OPS:
        results = _run_subgraph(session, subplans, graphs[0 if truth(args[0]) else 1], args[1:])
    elif node.type in CASE_OPS:
        index = int(args[0].reshape(-1)[0])
        results = _run_subgraph(session, subplans, graphs[index if 0 <= index < len(graphs) else -1], args[1:])
    elif node.type in WHILE_OPS:
        results = _loop(session, subplans, node, args)
    else:
        raise AssertionError(node.type)
    # An output that is (a view of) an input would change if the parent later wrote that input in place.
    return [np.array(r, copy=True) if any(np.may_share_memory(r, a) for a in args) else r for r in results]


def _loop(session: Any, subplans: dict[str, Subplan], node: Node, state: list[np.ndarray]) -> list[np.ndarray]:
    """The loop, within the run's budgets of loop bodies and of work (session.loop_budget and session.work_budget,
    which nested and successive loops share, so that nesting cannot multiply a run's time beyond them)."""
    cond, body = node.subgraph_graphs
    iterations, cost = 0, subplans[cond.name].work + subplans[body.name].work
    while truth(_run_subgraph(session, subplans, cond, state)[0]):
        if session.work_budget < cost:
            raise GraphError(f"{node.type} {node.name!r}: its cond {cond.name!r} still holds after {iterations} "
                             f"iterations of {cost} elements of work each (cond and body), and this run has spent "
                             f"{session.max_loop_work - session.work_budget} of this session's max_loop_work of "
                             f"{session.max_loop_work} elements (all While nodes together); pass "
                             "graph_ir.Session(max_loop_work=...) to allow more")
        if session.loop_budget <= 0:
            raise GraphError(f"{node.type} {node.name!r}: its cond {cond.name!r} still holds after {iterations} "
                             f"iterations, and this run has executed {session.max_loop_iterations} loop bodies (all "
                             "While nodes together), this session's max_loop_iterations; pass "
                             "graph_ir.Session(max_loop_iterations=...) to allow more")
        session.loop_budget -= 1
        copied = list_store.WORK[0]
        state = _run_subgraph(session, subplans, body, state)
        session.work_budget -= cost + list_store.WORK[0] - copied  # the TensorLists' copies beyond their outputs
        iterations += 1
    return state
