"""The functional ops (If, Case, While and their Stateless forms): built with the builder API, run in
graph_ir.Session and compared with TensorFlow (tf.cond, tf.while_loop, tf.raw_ops.If/Case/While) on the same values;
loops with bounded time and memory, nesting and bodies that allocate too much bounded. Saving, loading and the
graphs' variables and subgraphs: tests/graph_ir/test_control_flow_graphs.py."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import Const, Data, Graph, Session, ops
from tests.helpers.control_graphs import (
    case_graph,
    functional,
    if_graph,
    nested_ifs,
    nested_loop,
    run,
    subgraph,
    sum_loop,
)


def _values(rng, n=5):
    x = rng.standard_normal(n).astype(np.float32)
    x[0], x[1], x[2] = 0.0, -x[-1], np.nan  # a zero, a tie in magnitude, a NaN
    return x


@pytest.mark.parametrize("op_type", ["If", "StatelessIf"])
def test_if_runs_the_branch_tf_cond_runs(op_type):
    rng = np.random.default_rng(1)
    graph = if_graph(op_type)
    step = tf.function(lambda c, a, b: tf.cond(c, lambda: a * 2 + b, lambda: a - b))
    for c in (True, False):
        x, y = _values(rng), _values(rng)
        want = step(tf.constant(c), x, y).numpy()
        np.testing.assert_array_equal(run(graph, np.bool_(c), x, y)[0], want)


@pytest.mark.parametrize(("cond", "value"), [
    (("float32", ()), 0.0), (("float32", ()), np.nan), (("float32", ()), -0.0), (("float32", ()), -2.5),
    (("int64", ()), 0), (("int32", ()), 3), (("float32", (1,)), [0.0]), (("float32", (0,)), []),
    (("float64", (1, 1)), [[0.0]]), (("uint8", ()), 0)])
def test_if_cond_truth_is_tfs(cond, value):
    """A non-bool cond: a rank-0 value is true when non-zero (NaN too); any other rank when non-empty."""
    dtype, shape = cond
    c = np.asarray(value, dtype=dtype).reshape(shape)
    x, y = np.arange(5, dtype=np.float32), np.full(5, 3, np.float32)
    spec = tf.TensorSpec([5], tf.float32)
    then = tf.function(lambda a, b: a * 2 + b).get_concrete_function(spec, spec)
    other = tf.function(lambda a, b: a - b).get_concrete_function(spec, spec)
    want = tf.raw_ops.If(cond=tf.constant(c), input=[x, y], Tout=[tf.float32], then_branch=then, else_branch=other)
    np.testing.assert_array_equal(run(if_graph(cond=cond), c, x, y)[0], want[0].numpy())


@pytest.mark.parametrize("op_type", ["Case", "StatelessCase"])
def test_case_three_branches_and_out_of_range_index_runs_the_last(op_type):
    rng = np.random.default_rng(2)
    spec = tf.TensorSpec([4], tf.float32)
    branches = [tf.function(f).get_concrete_function(spec) for f in (lambda a: a + 0, lambda a: a + 1, lambda a: a * a)]
    session = Session()
    session.add_graph(0, case_graph(op_type))
    for k in (-7, -1, 0, 1, 2, 3, 2**31 - 1):
        x = _values(rng, 4)
        want = tf.raw_ops.Case(branch_index=tf.constant(k, tf.int32), input=[x], Tout=[tf.float32], branches=branches)
        np.testing.assert_array_equal(session.run_graph(0, [np.int32(k), x])[0], want[0].numpy(), err_msg=str(k))


@pytest.mark.parametrize("op_type", ["While", "StatelessWhile"])
def test_while_sums_one_to_ten_thousand(op_type):
    n = 10_000
    loop = tf.function(lambda n: tf.while_loop(lambda i, s: i <= n, lambda i, s: (i + 1, s + i),
                                               (tf.constant(1, tf.int64), tf.constant(0, tf.int64)))[1])
    want = loop(tf.constant(n, tf.int64))
    session = Session()
    session.add_graph(0, sum_loop(op_type))
    start = time.perf_counter()
    got = session.run_graph(0, [np.int64(n)])[0]
    elapsed = time.perf_counter() - start
    assert got == want.numpy() == n * (n + 1) // 2
    assert elapsed < 5, f"{n} iterations took {elapsed:.2f} s"
    assert session.run_graph(0, [np.int64(0)])[0] == 0  # no iteration: the initial state


def _loop_over_vector(size: int) -> Graph:
    """while i < n: x = x * 0.5 + 1 on a float64[size] vector."""
    state = [("int64", ()), ("int64", ()), ("float64", (size,))]
    cond = subgraph("c", state, lambda i, n, x: [ops.Less(i, n)])
    body = subgraph("b", state, lambda i, n, x: [ops.AddV2(i, Const(np.int64(1))), n,
                                                 ops.AddV2(ops.Mul(x, Const(0.5, "float64")), Const(1.0, "float64"))])
    root = Graph("vector_loop")
    with root:
        n, x = Data(0, "int64", ()), Data(1, "float64", (size,))
        node = functional(root, "While", [Const(np.int64(0)), n, x], [cond, body])
        root.set_outputs([node.output(2)])
    return root


def test_while_memory_does_not_grow_with_iterations():
    size = 20_000  # 160 KB of state
    session = Session()
    graph = _loop_over_vector(size)
    session.add_graph(0, graph)
    x = np.zeros(size)
    peaks = []
    for n in (10, 1000):
        tracemalloc.start()
        out = session.run_graph(0, [np.int64(n), x])[0]
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert np.all(out == 2 - 2.0 ** (1 - n))
    assert peaks[1] < peaks[0] + 2 * x.nbytes, peaks
    assert peaks[1] < 8 * x.nbytes, peaks
    # The planner counts a While as its body's peak plus the loop state: a bound on what a run allocates.
    assert max(peaks) <= session._plans[0].peak_bytes, (peaks, session._plans[0].peak_bytes)


def test_nested_if_inside_while_matches_tf():
    rng = np.random.default_rng(3)
    session = Session()
    session.add_graph(0, nested_loop())
    for n in (0, 1, 7, 40):
        x = _values(rng, 3)

        def body(i, v):
            s = tf.cast(i, tf.float32)
            return i + 1, tf.cond(tf.equal(i % 2, 0), lambda: v + s, lambda: v - s)

        want = tf.function(lambda n, x: tf.while_loop(lambda i, v: i < n, body, (tf.constant(0), x)))(
            tf.constant(n), tf.constant(x))
        got = session.run_graph(0, [np.int32(n), x])
        assert got[0] == want[0].numpy()
        np.testing.assert_array_equal(got[1], want[1].numpy())


@pytest.mark.parametrize(("dtype", "start"), [("int32", 13), ("float32", 6.0), ("int8", -4)])
def test_while_cond_may_be_a_number(dtype, start):
    """cond returns the counter itself: the loop runs while it is non-zero (TF's raw While does the same)."""
    params = [(dtype, ())]
    step = np.asarray(1 if start > 0 else -1, dtype).item()
    cond = subgraph("count_cond", params, lambda k: [k])
    body = subgraph("count_body", params, lambda k: [ops.Sub(k, Const(np.asarray(step, dtype)))])
    root = Graph("count_root")
    with root:
        node = functional(root, "While", [Data(0, dtype, ())], [cond, body])
        root.set_outputs([node.output(0)])
    spec = tf.TensorSpec([], dtype)
    tf_cond = tf.function(lambda k: k).get_concrete_function(spec)
    tf_body = tf.function(lambda k: k - tf.constant(step, dtype)).get_concrete_function(spec)
    value = np.asarray(start, dtype)
    want = tf.raw_ops.While(input=[value], cond=tf_cond, body=tf_body)[0].numpy()
    np.testing.assert_array_equal(run(root, value)[0], want)


def test_the_planner_bounds_a_body_that_allocates_too_much():
    graph = _loop_over_vector(100_000)  # 800 KB per vector
    with pytest.raises(graph_ir.GraphError, match=r"above this session's bound .* at node 'While' \(While"):
        Session(max_run_bytes=1_000_000).add_graph(0, graph)
    Session(max_run_bytes=10_000_000).add_graph(0, graph)


def test_nesting_is_bounded_at_32_levels():
    assert run(nested_ifs(32), np.float32(0))[0] == 32
    with pytest.raises(graph_ir.GraphError, match=r"would nest subgraphs 33 deep; at most 32"):
        nested_ifs(33)
