"""TF's stateful random ops (RandomUniform, RandomStandardNormal, TruncatedNormal, RandomUniformInt; random_op.cc)
seeded, over 3 calls of a fresh trace beside 3 Session runs: each op one Philox stream, kept by the Session per added
graph (graph_ir/executors/random.py). Bitwise for the uniforms; the normals as test_random_ops.py's docstring says."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir.compare import compare_step
from tests.graph_ir.test_random_ops import _assert_close_normals, assert_bitwise


@pytest.fixture
def no_global_seed():
    """Leaves TF's global seed unset after the test, as the other tests expect it."""
    yield
    tf.random.set_seed(None)


STATEFUL_SHAPES = ((), (0,), (1,), (5,), (3, 7), (2, 1, 3), (1001,))
STATEFUL_FLOATS = (tf.float32, tf.float16, tf.float64)
_STATEFUL_DRAWS = {"RandomUniform": lambda shape, dtype: tf.random.uniform(shape, dtype=dtype),
                   "RandomStandardNormal": lambda shape, dtype: tf.random.normal(shape, dtype=dtype),
                   "TruncatedNormal": lambda shape, dtype: tf.random.truncated_normal(shape, dtype=dtype)}


def _stateful_runs(make, calls: int = 3, seed: int = 42):
    """make() -> a fresh tf.function of one float32 argument (a scalar added to nothing, so that the Session has an
    input); lowered after tf.random.set_seed(seed), then traced again from the same seed and called `calls` times
    beside `calls` Session runs: yields (call, got, want) per output."""
    x = np.float32(0)
    tf.random.set_seed(seed)
    graph = graph_ir.from_tensorflow(make(), tf.TensorSpec((), tf.float32))
    session = graph_ir.Session()
    session.add_graph(0, graph)
    tf.random.set_seed(seed)
    step = make()  # a new trace: its kernels, and their generators, are made at its first call
    for call in range(calls):
        got, want = session.run_graph(0, [x]), [t.numpy() for t in tf.nest.flatten(step(x))]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            yield call, g, w


@pytest.mark.parametrize("op", list(_STATEFUL_DRAWS))
@pytest.mark.parametrize("dtype", STATEFUL_FLOATS, ids=lambda d: d.name)
def test_stateful_float_draws_are_tfs_over_calls(op, dtype, no_global_seed):
    """Each op (several in one function: each its own stream, op seeds 0, 1, ...) draws TF's numbers at each of 3
    calls: uniforms bitwise; normals too but for libm's last bit (the module docstring): each element within
    _assert_close_normals's bounds, 97% of all the test's elements bitwise (a small tensor may hold one of them)."""
    def make():
        return tf.function(lambda x: [_STATEFUL_DRAWS[op](shape, dtype) for shape in STATEFUL_SHAPES])

    draws = list(_stateful_runs(make))
    assert len(draws) == 3 * len(STATEFUL_SHAPES)
    for call, got, want in draws:
        if op == "RandomUniform":
            assert_bitwise(got, want)
    if op != "RandomUniform":
        _assert_close_normals(*(np.concatenate([d[i].reshape(-1) for d in draws]) for i in (1, 2)))
    first, later = draws[len(STATEFUL_SHAPES) - 1][1], draws[-1][1]
    assert not np.array_equal(first, later)  # the stream advanced between calls


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64], ids=lambda d: d.name)
def test_stateful_uniform_int_is_bitwise_over_calls(dtype, no_global_seed):
    info = np.iinfo(dtype.as_numpy_dtype)
    ranges = ((-5, 7), (0, 1), (-1000, 10**6), (int(info.min), int(info.max)))

    def make():
        return tf.function(lambda x: [tf.random.uniform(shape, lo, hi, dtype=dtype)
                                      for shape in STATEFUL_SHAPES for lo, hi in ranges])

    draws = list(_stateful_runs(make))
    assert len(draws) == 3 * len(STATEFUL_SHAPES) * len(ranges)
    for _, got, want in draws:
        assert_bitwise(got, want)


def test_op_seeds_and_a_graph_lowered_anew(no_global_seed):
    """Op-level seeds without a global one (seed2 = the op's, seed = TF's default graph seed): two ops of the same
    seeds are two streams (TF's two kernels), not one; a graph lowered anew starts its streams at the seeds again,
    while the session's graph goes on."""
    def make():
        return tf.function(lambda x: x + tf.random.uniform((4, 3), seed=11) * tf.random.uniform((4, 3), seed=11))

    step, x = make(), np.zeros((4, 3), np.float32)
    graph = graph_ir.from_tensorflow(step, tf.TensorSpec((4, 3), tf.float32))
    assert [n.attrs["seed2"] for n in graph.nodes.values() if n.type.startswith("Random")] == [11, 11]
    session = graph_ir.Session()
    session.add_graph(0, graph)
    want = [step(x).numpy() for _ in range(3)]
    got = [session.run_graph(0, [x])[0] for _ in range(2)]
    again = graph_ir.Session()
    again.add_graph(0, graph_ir.from_tensorflow(make(), tf.TensorSpec((4, 3), tf.float32)))
    for g, w in zip([*got, session.run_graph(0, [x])[0]], want, strict=True):
        assert_bitwise(g, w)
    assert_bitwise(again.run_graph(0, [x])[0], want[0])


def test_an_unseeded_stateful_op_is_refused_naming_the_node(no_global_seed):
    tf.random.set_seed(None)
    step = tf.function(lambda x: x + tf.random.uniform((3,)))
    with pytest.raises(graph_ir.LoweringError, match=r"RandomUniform \(node '.*'\): it has no seed.*"
                                                     r"keras.utils.set_random_seed"):
        graph_ir.from_tensorflow(step, tf.TensorSpec((3,), tf.float32))


@pytest.mark.parametrize("op", list(_STATEFUL_DRAWS))
def test_a_bfloat16_stateful_draw_is_refused_naming_the_node(op, no_global_seed):
    """TF draws bfloat16; GE's REG_OPs of these ops take float16, float32 and float64 only."""
    tf.random.set_seed(3)
    step = tf.function(lambda x: _STATEFUL_DRAWS[op]((3,), tf.bfloat16))
    assert step(np.float32(0)).dtype == tf.bfloat16
    with pytest.raises(graph_ir.LoweringError, match=rf"{op} \(node '.*'\): its dtype is bfloat16"):
        graph_ir.from_tensorflow(step, tf.TensorSpec((), tf.float32))


def test_stateful_uniform_int_needs_minval_below_maxval(no_global_seed):
    tf.random.set_seed(3)
    step = tf.function(lambda lo, hi: tf.random.uniform((3,), lo, hi, dtype=tf.int32))
    spec = tf.TensorSpec((), tf.int32)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.from_tensorflow(step, spec, spec))
    with pytest.raises(graph_ir.GraphError, match=r"RandomUniformInt .*minval < maxval.*got 4 and 4"):
        session.run_graph(0, [np.int32(4), np.int32(4)])
    with pytest.raises(tf.errors.InvalidArgumentError, match="Need minval < maxval"):
        step(np.int32(4), np.int32(4))


def test_streams_are_the_sessions_per_added_graph(no_global_seed):
    """One Graph object in two sessions: each session's streams start at the seeds (TF: each function instance its
    own kernels); remove_graph then add_graph starts them again; the plans of a template graph (a None batch) at two
    shapes go on with one stream, as TF's one concrete function does."""
    tf.random.set_seed(5)
    step = tf.function(lambda x: x + tf.random.uniform(tf.shape(x)))
    graph = graph_ir.from_tensorflow(step, tf.TensorSpec((None, 3), tf.float32))
    want = [step(np.zeros((n, 3), np.float32)).numpy() for n in (4, 2, 4)]
    first, second = graph_ir.Session(), graph_ir.Session()
    first.add_graph(0, graph)
    second.add_graph(0, graph)
    for session in (first, second):
        for n, w in zip((4, 2, 4), want, strict=True):
            assert_bitwise(session.run_graph(0, [np.zeros((n, 3), np.float32)])[0], w)
    first.remove_graph(0)
    first.add_graph(0, graph)
    assert_bitwise(first.run_graph(0, [np.zeros((4, 3), np.float32)])[0], want[0])


def test_compare_step_finds_no_defect_in_a_step_that_draws(no_global_seed):
    """compare_step runs each node isolated as well: a stateful draw run again draws what its run drew (the
    session's streams are left as they were), so neither the draw nor what reads it departs."""
    tf.random.set_seed(8)
    scale = tf.Variable(np.float32(2.0))

    @tf.function
    def step(x):
        noise = tf.random.normal(tf.shape(x)) * 0.1
        scale.assign_add(tf.reduce_sum(x + noise) * 1e-3)
        return x * scale + noise

    x = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    step(x)  # the trace compare_step lowers and runs: its draws go on from the first call's
    comparison = compare_step(step, x)
    assert comparison.first_defect is None and comparison.first_departure is None, comparison.summary()
