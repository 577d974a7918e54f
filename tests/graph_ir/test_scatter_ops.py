"""The scatter family (graph_ir/opset/scatter.py) against TF's CPU kernel, bitwise: tf.tensor_scatter_nd_add, _sub,
_max and _min with repeated indices (applied in order), index depths 1 and 2, NaN, +-inf, zeros and ties, empty
updates, in float32, float16 and int32; an index out of range is refused as TF refuses it; and the gradient of a
scatter-add in a step."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from tests.helpers import train_steps

OPS = {"TensorScatterAdd": tf.tensor_scatter_nd_add, "TensorScatterSub": tf.tensor_scatter_nd_sub,
       "TensorScatterMax": tf.tensor_scatter_nd_max, "TensorScatterMin": tf.tensor_scatter_nd_min}
TESTED = (*OPS, "XlaDynamicUpdateSlice")  # bitwise, each (tests/graph_ir/test_family_ops.py PER_OP_TESTS)


def _values(rng, shape, dtype):
    x = rng.standard_normal(shape) * 3
    x[rng.random(shape) < 0.2] = 0
    if dtype == "int32":
        return np.round(x).astype(dtype)
    for value, share in ((np.nan, 0.08), (np.inf, 0.05), (-np.inf, 0.05)):
        x[rng.random(shape) < share] = value
    return x.astype(dtype)


def _runner(op):
    return lambda x, i, u: OPS[op](x, i, u)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("op", list(OPS))
def test_tensor_scatter_ops(op, dtype):
    rng = np.random.default_rng(81)
    for shape, count, depth in (((7, 9), 12, 1), ((5, 4, 3), 9, 2), ((6,), 10, 1), ((4, 3), 0, 1)):
        x = _values(rng, shape, dtype)
        indices = np.stack([rng.integers(0, shape[d], count) for d in range(depth)], -1).astype(np.int32)
        updates = _values(rng, (count, *shape[depth:]), dtype)
        feeds = [x, indices, updates]
        specs = [tf.TensorSpec(f.shape, tf.as_dtype(f.dtype)) for f in feeds]
        graph = graph_ir.from_tensorflow(tf.function(_runner(op)), *specs)
        assert graph.nodes_of_type(op)
        session = graph_ir.Session()
        session.add_graph(0, graph)
        (got,) = session.run_graph(0, feeds)
        want = OPS[op](*feeds).numpy()
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_an_index_out_of_range_is_refused_as_tf_refuses_it():
    x, indices, updates = np.zeros((4, 2), np.float32), np.array([[1], [4]], np.int32), np.ones((2, 2), np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.tensor_scatter_nd_add(x, indices, updates)
    specs = [tf.TensorSpec(f.shape, tf.as_dtype(f.dtype)) for f in (x, indices, updates)]
    graph = graph_ir.from_tensorflow(tf.function(_runner("TensorScatterAdd")), *specs)
    session = graph_ir.Session()
    session.add_graph(0, graph)
    with pytest.raises(graph_ir.GraphError, match=r"TensorScatterAdd .*indices\[1\] = \[4\] does not index into x"):
        session.run_graph(0, [x, indices, updates])


def test_scatter_add_gradient_in_a_step(tmp_path):
    rng = np.random.default_rng(82)
    table = tf.Variable(rng.standard_normal((6, 3)).astype(np.float32))
    indices = np.array([[1], [4], [1]], np.int32)

    @tf.function
    def step(updates):
        with tf.GradientTape() as tape:
            out = tf.tensor_scatter_nd_add(table * 2.0, tf.constant(indices), updates * table[:3])
            loss = tf.reduce_sum(tf.square(out))
        table.assign_sub(0.01 * tape.gradient(loss, table))
        return loss

    _, differences, loss = train_steps.lower_and_compare(
        step, [tf.TensorSpec((3, 3), tf.float32)], lambda k: [rng.standard_normal((3, 3)).astype(np.float32)],
        [table], str(tmp_path), steps=3)
    assert loss <= 1e-5 and max(differences.values()) <= 1e-5, (loss, differences)


@pytest.mark.parametrize("start", [(1, 1, 0), (3, 4, 0), (-2, 0, 1), (0, 2, 9), (0, 0, 0)])
def test_xla_dynamic_update_slice_with_known_starts(start):
    """keras.ops.slice_update's op: the start clamped into the input as XLA clamps it, bitwise (NaN, -0.0)."""
    from tensorflow.compiler.tf2xla.python import xla

    rng = np.random.default_rng(83)
    x, update = _values(rng, (4, 5, 2), "float32"), _values(rng, (2, 3, 2), "float32")
    fn = tf.function(lambda x, u: xla.dynamic_update_slice(x, u, tf.constant(start)))
    graph = graph_ir.from_tensorflow(fn, tf.TensorSpec(x.shape, tf.float32), tf.TensorSpec(update.shape, tf.float32))
    session = graph_ir.Session()
    session.add_graph(0, graph)
    (got,) = session.run_graph(0, [x, update])
    want = fn(x, update).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_xla_dynamic_update_slice_larger_than_its_input_is_refused():
    """At computed starts (tests/graph_ir/test_dynamic_slice_updates.py) the update must fit the input all the same."""
    from tensorflow.compiler.tf2xla.python import xla

    fn = tf.function(lambda x, u, i: xla.dynamic_update_slice(x, u, i))
    with pytest.raises(graph_ir.LoweringError, match=r"XlaDynamicUpdateSlice .*update \[2, 6\].*does not fit"):
        graph_ir.from_tensorflow(fn, tf.TensorSpec((4, 5), tf.float32), tf.TensorSpec((2, 6), tf.float32),
                                 tf.TensorSpec((2,), tf.int32))
