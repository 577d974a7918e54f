"""Each TF op the op families lower (graph_ir/lowering/ops), alone in a tf.function: lowered, run in graph_ir.Session
and compared with TensorFlow on fresh random inputs (zeros, negatives, ties, odd sizes), within the tolerance the
docs/lowering.md's lowering table states for it: 0 (bitwise) where the arithmetic is the same, else relative to the output's
scale."""

from __future__ import annotations

import importlib
import sys
import zlib

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir.lowering import ops
from tests.helpers.train_steps import scaled_difference

ROUNDING = 2e-6  # a few roundings apart: exp, tanh, erf, softmax (Eigen's approximations), pooling sums in another order
PRODUCT = 1e-5  # matmul, einsum and float reductions: BLAS's and NumPy's summation order against Eigen's


def _floats(rng, *shape):
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[::5] = 0
    flat[1::7] = flat[-1]  # ties
    return x


# name -> (function of tensors, inputs from rng, tolerance)
CASES = {
    "AddV2": (tf.add, lambda r: [_floats(r, 5, 3), _floats(r, 3)], 0),
    "DivNoNan": (tf.math.divide_no_nan, lambda r: [_floats(r, 7), _floats(r, 7)], 0),
    "SquaredDifference": (tf.math.squared_difference, lambda r: [_floats(r, 4, 3), _floats(r, 1, 3)], 0),
    "Relu": (tf.nn.relu, lambda r: [_floats(r, 9)], 0),
    "Sigmoid": (tf.sigmoid, lambda r: [_floats(r, 33) * 4], ROUNDING),
    "Tanh": (tf.tanh, lambda r: [_floats(r, 33) * 4], ROUNDING),
    "Erfc": (tf.math.erfc, lambda r: [_floats(r, 33)], ROUNDING),
    "Erf": (tf.math.erf, lambda r: [_floats(r, 33)], ROUNDING),
    "ReluGrad": (lambda dy, x: tf.raw_ops.ReluGrad(gradients=dy, features=x), lambda r: [_floats(r, 9), _floats(r, 9)], 0),
    # Eigen rounds dy * (y * (1 - y)) in its SIMD packets but dy * y * (1 - y) in the tail: an ulp apart.
    "SigmoidGrad": (lambda y, dy: tf.raw_ops.SigmoidGrad(y=y, dy=dy), lambda r: [_floats(r, 9), _floats(r, 9)],
                    ROUNDING),
    "TanhGrad": (lambda y, dy: tf.raw_ops.TanhGrad(y=y, dy=dy), lambda r: [_floats(r, 9), _floats(r, 9)], 0),
    "RsqrtGrad": (lambda y, dy: tf.raw_ops.RsqrtGrad(y=y, dy=dy), lambda r: [_floats(r, 9), _floats(r, 9)], 0),
    "AddN": (lambda a, b, c: tf.add_n([a, b, c]), lambda r: [_floats(r, 3, 5) for _ in range(3)], 0),
    "CheckNumerics": (lambda x: tf.debugging.check_numerics(x, "finite"), lambda r: [_floats(r, 7)], 0),
    # 4,900 elements: above the folding limit, so a GE Empty node runs (tf.nn.ctc_loss's buffers, init true)
    "Empty": (lambda x: tf.raw_ops.Empty(shape=tf.shape(x), dtype=tf.float32, init=True) - x,
              lambda r: [_floats(r, 70, 70)], 0),
    "Sum": (lambda x: tf.reduce_sum(x, axis=[0, 2]), lambda r: [_floats(r, 5, 3, 7)], PRODUCT),
    "Mean": (lambda x: tf.reduce_mean(x, axis=1, keepdims=True), lambda r: [_floats(r, 5, 9)], PRODUCT),
    "Prod": (lambda x: tf.reduce_prod(x, axis=0), lambda r: [_floats(r, 3, 4)], PRODUCT),
    "Max": (lambda x: tf.reduce_max(x, axis=-1), lambda r: [_floats(r, 3, 4)], 0),
    "MatMul": (lambda a, b: tf.matmul(a, b, transpose_b=True), lambda r: [_floats(r, 5, 7), _floats(r, 3, 7)], PRODUCT),
    "BatchMatMulV2": (lambda a, b: tf.matmul(a, b, adjoint_a=True), lambda r: [_floats(r, 2, 7, 5), _floats(r, 1, 7, 3)],
                      PRODUCT),
    "Einsum": (lambda a, b: tf.einsum("abc,cd->abd", a, b), lambda r: [_floats(r, 2, 3, 5), _floats(r, 5, 4)], PRODUCT),
    "BiasAdd": (tf.nn.bias_add, lambda r: [_floats(r, 3, 4, 5), _floats(r, 5)], 0),
    "BiasAddGrad": (lambda x: tf.raw_ops.BiasAddGrad(out_backprop=x), lambda r: [_floats(r, 6, 5)], PRODUCT),
    "Softmax": (tf.nn.softmax, lambda r: [_floats(r, 4, 7) * 3], ROUNDING),
    "SparseSoftmaxCrossEntropyWithLogits": (
        lambda f: tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=f, labels=tf.constant([0, 4, 2, 4]))[::-1],
        lambda r: [_floats(r, 4, 5)], ROUNDING),
    "FusedBatchNormV3": (
        lambda x, s, o: tf.raw_ops.FusedBatchNormV3(x=x, scale=s, offset=o, mean=tf.zeros(0), variance=tf.zeros(0),
                                                    epsilon=1e-3, is_training=True)[:5],
        lambda r: [_floats(r, 3, 5, 4, 6), _floats(r, 6), _floats(r, 6)], PRODUCT),
    "FusedBatchNormGradV3": (
        lambda dy, x, s: tf.raw_ops.FusedBatchNormGradV3(
            y_backprop=dy, x=x, scale=s, reserve_space_1=tf.reduce_mean(x, [0, 1, 2]),
            reserve_space_2=tf.math.reduce_variance(x, [0, 1, 2]), reserve_space_3=tf.zeros(0), epsilon=1e-3,
            data_format="NHWC", is_training=True)[:3],
        lambda r: [_floats(r, 2, 3, 5, 4), _floats(r, 2, 3, 5, 4), _floats(r, 4)], PRODUCT),
    "Reshape": (lambda x: tf.reshape(x, [-1, 6]), lambda r: [_floats(r, 4, 3)], 0),
    "ExpandDims": (lambda x: tf.expand_dims(x, -1), lambda r: [_floats(r, 4, 3)], 0),
    "Squeeze": (lambda x: tf.squeeze(x, [1]), lambda r: [_floats(r, 4, 1, 3)], 0),
    "Tile": (lambda x: tf.tile(x, [2, 3]), lambda r: [_floats(r, 2, 3)], 0),
    "Transpose": (lambda x: tf.transpose(x, [2, 0, 1]), lambda r: [_floats(r, 2, 3, 4)], 0),
    "BroadcastTo": (lambda x: tf.broadcast_to(x, [4, 3]), lambda r: [_floats(r, 3)], 0),
    "ConcatV2": (lambda a, b: tf.concat([a, b], axis=1), lambda r: [_floats(r, 2, 3), _floats(r, 2, 5)], 0),
    "Pack": (lambda a, b: tf.stack([a, b], axis=1), lambda r: [_floats(r, 2, 3), _floats(r, 2, 3)], 0),
    "GatherV2": (lambda x: tf.gather(x, [3, 0, 3, 1]), lambda r: [_floats(r, 5, 2)], 0),
    "StridedSlice": (lambda x: x[1:, ::2, 0], lambda r: [_floats(r, 4, 5, 3)], 0),
    "UnsortedSegmentSum": (lambda x: tf.math.unsorted_segment_sum(x, [2, 0, 2, -1, 1], 4), lambda r: [_floats(r, 5, 3)],
                           0),
    "Shape": (lambda x: tf.shape(x) * 2, lambda r: [_floats(r, 4, 3)], 0),
    "Range": (lambda x: x * tf.cast(tf.range(2, 11, 3), tf.float32), lambda r: [_floats(r, 3)], 0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_lowered_op_runs_like_tensorflow(name):
    fn, make_inputs, tolerance = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    inputs = make_inputs(rng)
    step = tf.function(fn)
    graph = graph_ir.from_tensorflow(step, *[tf.TensorSpec(x.shape, tf.float32) for x in inputs])
    session = graph_ir.Session()
    session.add_graph(0, graph)
    got = session.run_graph(0, inputs)
    want = [t.numpy() for t in tf.nest.flatten(step(*inputs))]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        if tolerance == 0:
            np.testing.assert_array_equal(g, w)
        else:
            assert scaled_difference(g, w) <= tolerance, (name, scaled_difference(g, w))


# The per-op test modules: each exports CASES (named "<TF op>" or "<TF op>-<case>") or TESTED (TF op names), the ops
# it lowers and runs beside TensorFlow. Imported when checked: they import this module's helpers. A bare name is a
# module of tests/graph_ir; a dotted one is imported as it is.
PER_OP_TESTS = ("test_activation_ops", "test_conv_ops", "test_depthwise_ops", "test_grouped_conv", "test_slicing_ops",
                "test_tile_gather", "test_random_ops", "test_tensorlist_ops", "test_lowering_control", "test_rnn_steps",
                "test_segment_ops", "test_linalg_ops", "test_scatter_ops", "test_bucketize", "test_matrix_ops",
                "test_math_ops", "test_fft_ops", "test_image_ops", "test_checks", "test_ctc", "test_sparse_updates",
                "test_distributed_lowering", "tests.distributed.test_hccl_tf_ops")


def ops_tested_by(module) -> set[str]:
    """The TF ops a per-op test module says it tests (its CASES' names before any "-", and its TESTED)."""
    return {name.split("-")[0] for name in getattr(module, "CASES", ())} | set(getattr(module, "TESTED", ()))


def test_every_family_lowering_is_tested_or_covered_by_a_step():
    """Each TF op of the families is tested alone above or by a per-op test module (PER_OP_TESTS), or is shape
    plumbing that only appears folded, or shares its lowering with a tested op."""
    folded_only = {"ShapeN", "Size", "Rank", "BroadcastGradientArgs", "BroadcastArgs", "Fill", "ZerosLike", "OnesLike",
                   "Cast", "BatchMatMulV3"}
    same_as_tested = {"Add", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Pow", "FloorMod", "FloorDiv", "Cos",
                      "Sin", "Sqrt", "Rsqrt", "Square", "Neg", "Abs", "Sign", "Floor", "Exp", "Log", "Less",
                      "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual", "Select", "SelectV2"}
    untested = set(ops.LOWERINGS) - ops_tested_by(sys.modules[__name__]) - folded_only - same_as_tested
    for name in PER_OP_TESTS:
        untested -= ops_tested_by(importlib.import_module(name if "." in name else f"tests.graph_ir.{name}"))
    assert not untested, sorted(untested)


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
def test_bfloat16_expand_dims_is_a_reshape(axis):
    """GE's ExpandDims takes no bfloat16 (Llama's attention repeats its bfloat16 keys through one): a Reshape, bitwise."""
    x = _floats(np.random.default_rng(5), 2, 3).astype(ml_dtypes.bfloat16)
    step = tf.function(lambda x: tf.expand_dims(x, axis) * 2)
    graph = graph_ir.from_tensorflow(step, tf.TensorSpec(x.shape, tf.bfloat16))
    assert not graph.nodes_of_type("ExpandDims") and graph.nodes_of_type("Reshape")
    session = graph_ir.Session()
    session.add_graph(0, graph)
    (got,) = session.run_graph(0, [x])
    want = step(x).numpy()
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_batch_norm_inference_and_the_running_average_refusal():
    rng = np.random.default_rng(11)
    x, scale, offset = _floats(rng, 2, 3, 3, 5), _floats(rng, 5), _floats(rng, 5)
    mean, variance = _floats(rng, 5), np.abs(_floats(rng, 5)) + 0.5

    def infer(x):
        return tf.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=mean, variance=variance,
                                           epsilon=1e-3, is_training=False)[0]

    step = tf.function(infer)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.from_tensorflow(step, tf.TensorSpec(x.shape, tf.float32)))
    assert scaled_difference(session.run_graph(0, [x])[0], step(x).numpy()) <= PRODUCT

    def running(x):
        return tf.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=mean, variance=variance,
                                           epsilon=1e-3, exponential_avg_factor=0.9, is_training=True)[1]

    with pytest.raises(graph_ir.LoweringError, match=r"FusedBatchNormV3 .*exponential_avg_factor 0.9"):
        graph_ir.from_tensorflow(tf.function(running), tf.TensorSpec(x.shape, tf.float32))
