"""Hostile loops and TensorLists (issue 38): loops that never end and lists that would grow without bound, each a
few bytes of graph. Each runs in a child process (tests/helpers/hostile_loops.py) under the default Session and stops
with a GraphError naming the loop or the list's node, or finishes, within 5 s and 512 MiB beyond the imports. The
work budget's own rules (per run, shared by all loops, what a run that stops leaves) are tested in-process."""

from __future__ import annotations

import re

import numpy as np
import pytest

import graph_ir
from graph_ir import Const, Graph, ops
from graph_ir.executors import control
from tests.helpers.control_graphs import add_graph_of, functional, subgraph, sum_loop
from tests.helpers.hostile_loops import BIG, measure

SECONDS, MIB = 5, 512
WORK = r"this run has spent \d+ of this session's max_loop_work of 1073741824 elements"


@pytest.mark.parametrize("case, message", [
    ("spin", (rf"While 'spin': its cond 'spin_cond' still holds after \d+ iterations of 6148 elements of work each "
              rf"\(cond and body\), and {WORK}")),
    ("fill_state", rf"While 'grow': its cond 'grow_cond' still holds after \d\d iterations of 125\d+ elements.*{WORK}"),
    ("push", rf"While 'push': .* still holds after \d+ iterations.*{WORK}"),
    ("set_reserved", rf"While 'set_reserved': .* still holds after \d+ iterations.*{WORK}"),
    ("sixteen_lists", (r"TensorListPushBack 'TensorListPushBack_\d+': the TensorLists alive would hold \d+ bytes "
                       r"together, above graph_ir's bound of 268435456 bytes for all lists")),
    ("many_reserved", (r"TensorListSetItem 'TensorListSetItem_\d+': the TensorLists alive would hold \d+ bytes "
                       r"together")),
])
def test_a_hostile_loop_or_list_stops_in_seconds(case, message):
    report = measure(case)
    assert report["error"] is not None and re.fullmatch(message + ".*", report["error"]), report
    assert report["seconds"] < SECONDS and report["peak_mib"] < MIB, report


def test_lists_convert_to_and_from_tensors_at_the_cost_of_a_tensor():
    report = measure("from_fill")
    assert report["error"] is None and report["outputs"] == [[BIG], 3, 3], report
    assert report["seconds"] < SECONDS and report["peak_mib"] < MIB, report
    for case in ("zero_size", "reserved_empty"):  # 2**24 elements of size 0, set from a tensor or never set
        report = measure(case)
        assert report["error"] is None and report["outputs"] == [[BIG, 0]], report
        assert report["seconds"] < SECONDS and report["peak_mib"] < MIB, report


def test_the_work_budget_is_per_run_shared_and_charged_before_the_body():
    """sum_loop(n) costs cond + body elements per iteration: a budget of exactly n iterations runs it, every run
    anew; one element less stops it before body n runs."""
    graph = sum_loop()
    cost = sum(control.NODE_WORK + sum(d.num_elements for d in node.output_descs)
               for g in graph.subgraphs.values() for node in g.nodes.values())
    session = graph_ir.Session(max_loop_work=30 * cost)
    session.add_graph(0, graph)
    for _ in range(2):
        assert int(session.run_graph(0, [np.int64(30)])[0]) == 465
    session = graph_ir.Session(max_loop_work=30 * cost - 1)
    session.add_graph(0, graph)
    with pytest.raises(graph_ir.GraphError, match=rf"While 'loop': its cond 'sum_cond' still holds after 29 "
                                                  rf"iterations of {cost} elements of work each \(cond and body\), "
                                                  rf"and this run has spent {29 * cost} of this session's "
                                                  rf"max_loop_work of {30 * cost - 1} elements"):
        session.run_graph(0, [np.int64(30)])
    with pytest.raises(TypeError, match=r"max_loop_work must be an int >= 0, got -1"):
        graph_ir.Session(max_loop_work=-1)
    with pytest.raises(TypeError, match=r"max_loop_work must be an int >= 0, got 1.5"):
        graph_ir.Session(max_loop_work=1.5)


def test_an_if_in_the_body_counts_its_largest_branch_and_a_nested_loop_its_own_iterations():
    """A body holding an If of a large and a small branch costs the large one each iteration, whichever runs."""
    params = [("int32", ()), ("float32", (1000,))]
    big = subgraph("big", [("float32", (1000,))], lambda v: [ops.Mul(v, v)])
    small = subgraph("small", [("float32", (1000,))], lambda v: [v])

    def body(i, x):
        branch = functional(add_graph_of(i), "If", [Const(np.bool_(False)), x], [big, small], name="pick")
        return [ops.AddV2(i, Const(np.int32(1))), branch.output(0)]

    root = Graph("if_loop")
    with root:
        node = functional(root, "While", [Const(np.int32(0)), graph_ir.Data(0, "float32", (1000,))],
                          [subgraph("c", params, lambda i, x: [ops.Less(i, Const(np.int32(5)))]),
                           subgraph("b", params, body)], name="outer")
        root.set_outputs([node.output(1)])
    session = graph_ir.Session()
    session.add_graph(0, root)
    plans = session._plans[0].subplans
    own = sum(control.NODE_WORK + sum(d.num_elements for d in n.output_descs) for n in root.subgraphs["b"].nodes.values())
    assert plans["b"].work == own + plans["big"].work  # the larger branch, though the small one runs
    assert plans["big"].work == 3 * control.NODE_WORK + 2000 and plans["small"].work == 2 * control.NODE_WORK + 1000
    x = np.linspace(-1, 1, 1000).astype(np.float32)
    np.testing.assert_array_equal(session.run_graph(0, [x])[0], x)
    cost = plans["c"].work + plans["b"].work
    stopped = graph_ir.Session(max_loop_work=5 * cost - 1)
    stopped.add_graph(0, root)
    with pytest.raises(graph_ir.GraphError, match=r"While 'outer': .* still holds after 4 iterations"):
        stopped.run_graph(0, [x])
