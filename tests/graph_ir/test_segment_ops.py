"""The segment family (graph_ir/opset/segment.py) against TF's CPU kernels, bitwise: tf.math.segment_sum and
segment_max with sorted Const ids, unsorted_segment_max / min / prod with ids fed at run time, on zeros, ties,
negatives, NaN, +-inf, empty segments, dropped (negative) ids, empty inputs and odd sizes, in float32, float16 and
int32; their gradients in a step; and the refusals TF makes. SegmentMin and SegmentMean (no CANN REG_OP) lower onto
SegmentMax, UnsortedSegmentMin and SegmentSum (graph_ir/lowering/ops/segment.py), bitwise TF's too."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir.lowering import ops
from tests.helpers import train_steps

UNSORTED = {"UnsortedSegmentMax": tf.math.unsorted_segment_max, "UnsortedSegmentMin": tf.math.unsorted_segment_min,
            "UnsortedSegmentProd": tf.math.unsorted_segment_prod}
SORTED = {"SegmentSum": tf.math.segment_sum, "SegmentMax": tf.math.segment_max, "SegmentMin": tf.math.segment_min,
          "SegmentMean": tf.math.segment_mean}
TESTED = (*UNSORTED, *SORTED)  # bitwise, each (tests/graph_ir/test_family_ops.py PER_OP_TESTS)


def _data(rng, dtype, rows, cols):
    x = rng.standard_normal((rows, cols)) * 3
    x[rng.random(x.shape) < 0.15] = 0
    x[rng.random(x.shape) < 0.15] = x.reshape(-1)[0] if x.size else 0  # ties
    if dtype != "int32":
        x[rng.random(x.shape) < 0.05] = np.nan
        x[rng.random(x.shape) < 0.05] = np.inf
        x[rng.random(x.shape) < 0.05] = -np.inf
    return np.round(x).astype(dtype) if dtype == "int32" else x.astype(dtype)


def _run(fn, *feeds):
    specs = [tf.TensorSpec(f.shape, tf.as_dtype(f.dtype)) for f in feeds]
    graph = graph_ir.from_tensorflow(tf.function(fn), *specs)
    session = graph_ir.Session()
    session.add_graph(0, graph)
    return session.run_graph(0, list(feeds)), tf.function(fn)(*feeds).numpy(), graph


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)  # NaN where NaN; -0.0 and 0.0 compare equal, so check the bits too
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


def _unsorted(op: str, segments: int):
    return lambda x, ids: UNSORTED[op](x, ids, segments)


def _sorted(op: str, ids: np.ndarray):
    return lambda x: SORTED[op](x, tf.constant(ids))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("op", list(UNSORTED))
def test_unsorted_segment_ops(op, dtype):
    rng = np.random.default_rng(61)
    for rows, cols, segments in ((37, 3, 9), (1, 1, 4), (0, 5, 3), (12, 4, 1)):
        x = _data(rng, dtype, rows, cols)
        ids = rng.integers(-2, segments, rows).astype(np.int32)  # negative ids are dropped; some segments stay empty
        (got,), want, graph = _run(_unsorted(op, segments), x, ids)
        assert graph.nodes_of_type(op)
        _same(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("op", list(SORTED))
def test_sorted_segment_ops_with_const_ids(op, dtype):
    if op == "SegmentMean" and dtype == "int32":
        pytest.skip("integer means are refused (test_integer_segment_mean_is_refused)")
    rng = np.random.default_rng(62)
    for rows, cols in ((41, 3), (1, 2), (9, 1), (23, 11), (17, 16)):  # 11, 16 columns: packets of 8 and a tail
        x = _data(rng, dtype, rows, cols)
        ids = np.sort(rng.integers(0, rows // 3 + 2, rows)).astype(np.int64)  # gaps: empty segments give 0
        (got,), want, graph = _run(_sorted(op, ids), x)
        integer_min = op == "SegmentMin" and dtype == "int32"  # -x overflows: UnsortedSegmentMin
        assert graph.nodes_of_type("UnsortedSegmentMin" if integer_min else ops.LOWERINGS[op].ge_type)
        _same(got, want)


def test_integer_segment_mean_is_refused():
    with pytest.raises(graph_ir.LoweringError, match=r"TF SegmentMean '.*' of int32: an integer mean"):
        graph_ir.from_tensorflow(tf.function(lambda x: tf.math.segment_mean(x, tf.constant([0, 0, 1]))),
                                 tf.TensorSpec((3, 2), tf.int32))


def test_refusals_name_the_node_and_field():
    x = np.ones((4, 2), np.float32)
    with pytest.raises(graph_ir.LoweringError, match="SegmentSum .*segment_ids must be non-negative and sorted"):
        graph_ir.from_tensorflow(tf.function(lambda x: tf.math.segment_sum(x, tf.constant([0, 2, 1, 3]))),
                                 tf.TensorSpec((4, 2), tf.float32))
    with pytest.raises(graph_ir.LoweringError, match="SegmentMax .*'segment_ids' must come from a Const"):
        graph_ir.from_tensorflow(tf.function(lambda x, i: tf.math.segment_max(x, i)),
                                 tf.TensorSpec((4, 2), tf.float32), tf.TensorSpec((4,), tf.int32))
    fn = tf.function(lambda x, ids: tf.math.unsorted_segment_max(x, ids, 3))
    graph = graph_ir.from_tensorflow(fn, tf.TensorSpec((4, 2), tf.float32), tf.TensorSpec((4,), tf.int32))
    session = graph_ir.Session()
    session.add_graph(0, graph)
    ids = np.array([0, 3, 1, 2], np.int32)
    with pytest.raises(tf.errors.InvalidArgumentError):
        fn(x, ids)
    with pytest.raises(graph_ir.GraphError, match=r"UnsortedSegmentMax .*segment_ids\[1\] = 3 is out of range"):
        session.run_graph(0, [x, ids])


def test_segment_pooling_step_with_gradients(tmp_path):
    """A graph-network-style readout: node features pooled per graph with unsorted max, sorted sum, min and mean, through a
    Dense layer; 3 SGD steps of the gradients in GE and TF."""
    rng = np.random.default_rng(63)
    w = tf.Variable(rng.standard_normal((4, 3)).astype(np.float32))
    graph_of_node = np.array([0, 0, 1, 1, 1, 3, 3], np.int64)  # graph 2 has no nodes

    @tf.function
    def step(nodes, ids):
        with tf.GradientTape() as tape:
            h = tf.tanh(nodes @ w)
            pooled = tf.math.unsorted_segment_max(h, ids, 4) + tf.math.segment_sum(h, tf.constant(graph_of_node))
            pooled += tf.math.segment_min(h, tf.constant(graph_of_node)) * tf.math.segment_mean(h, graph_of_node)
            loss = tf.reduce_sum(tf.square(tf.clip_by_value(pooled, -5.0, 5.0)))
        w.assign_sub(0.1 * tape.gradient(loss, w))
        return loss

    specs = [tf.TensorSpec((7, 4), tf.float32), tf.TensorSpec((7,), tf.int32)]
    _, differences, loss = train_steps.lower_and_compare(
        step, specs, lambda k: [rng.standard_normal((7, 4)).astype(np.float32), graph_of_node.astype(np.int32)],
        [w], str(tmp_path), steps=3)
    assert loss <= 1e-5 and max(differences.values()) <= 1e-5, (loss, differences)
