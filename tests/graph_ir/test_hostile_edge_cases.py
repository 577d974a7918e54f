"""Issue 38's edge cases of the activation and logic families, each against tf.raw_ops on the same inputs, bitwise
(NaN where TF has NaN, the sign of every zero): softmax over an empty axis and cross-entropy over zero classes (TF's
empty result and zero loss), labels broadcast from [1, C], ClipByValue's NaN bounds and signed zeros, and Relu6 of
-0.0 at every size (TF's AVX packets give +0.0, its scalar tail -0.0). What TF refuses is a GraphError naming the
node."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import Const, ops
from tests.graph_ir.test_hostile_values import _run, _same

NAN, INF = np.nan, np.inf
_SPECIAL = [-0.0, 0.0, NAN, -1.0, 7.0, 3.0, -INF, INF, 6.0, 1e-3, -2.5, 0.0]


def _specials(n: int, dtype, seed: int) -> np.ndarray:
    """n values: the special ones (zeros of both signs, NaN, infinities, ties) shuffled among fresh normals."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * 4
    x[rng.permutation(n)[:min(n, len(_SPECIAL))]] = _SPECIAL[:min(n, len(_SPECIAL))]
    return x.astype(dtype)


@pytest.mark.parametrize("shape", [(3, 0), (0, 4), (2, 0, 5)])
def test_softmax_over_an_empty_axis_is_the_empty_result(shape):
    x = np.zeros(shape, np.float32)
    _same(_run(lambda v: ops.LogSoftmaxV2(v), x)[0], tf.raw_ops.LogSoftmax(logits=x))
    _same(_run(lambda v: ops.SoftmaxV2(v), x)[0], tf.raw_ops.Softmax(logits=x))


@pytest.mark.parametrize("features_shape, labels_shape", [((4, 0), (4, 0)), ((0, 3), (0, 3)), ((4, 5), (1, 5)),
                                                           ((1, 5), (4, 5)), ((4, 1), (4, 5)), ((4, 5), (4, 5))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_with_zero_classes_and_broadcast_labels(features_shape, labels_shape, dtype):
    rng = np.random.default_rng(sum(features_shape) + 3 * sum(labels_shape))
    features = (rng.standard_normal(features_shape) * 3).astype(dtype)
    features.reshape(-1)[::4] = 0
    labels = rng.random(labels_shape).astype(dtype)
    got = _run(lambda f, lab: ops.SoftmaxCrossEntropyWithLogits(f, lab), features, labels)
    want = tf.raw_ops.SoftmaxCrossEntropyWithLogits(features=features, labels=labels)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=2e-6 if dtype == np.float32 else 1e-14, atol=0)
        assert g.shape == w.shape and g.dtype == w.dtype


def test_cross_entropy_shapes_tf_refuses_are_refused():
    features, labels = np.zeros((4, 5), np.float32), np.zeros((3, 5), np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.raw_ops.SoftmaxCrossEntropyWithLogits(features=features, labels=labels)
    with pytest.raises(graph_ir.GraphError, match=r"SoftmaxCrossEntropyWithLogits 'xent': features and labels must be "
                                                  r"\[batch, classes\] shapes that broadcast to one, got \[4, 5\] and "
                                                  r"\[3, 5\]"):
        _run(lambda f, lab: ops.SoftmaxCrossEntropyWithLogits(f, lab, name="xent"), features, labels)


_BOUNDS = [(NAN, 1.0), (0.0, NAN), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (-0.0, 0.0), (0.0, -0.0), (2.0, 1.0),
           (-INF, INF), (-1.0, 3.0)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("n", [1, 7, 9, 33, 1000])
def test_clip_by_value_takes_tfs_operands(dtype, n):
    x = _specials(n, dtype, seed=n)
    for lo, hi in _BOUNDS:
        scalar = (np.asarray(lo, dtype), np.asarray(hi, dtype))
        full = (np.full(n, lo, dtype), np.full(n, hi, dtype))
        for a, b in (scalar, full):
            got = _run(lambda v, lo_, hi_: ops.ClipByValue(v, lo_, hi_), x, a, b)[0]
            _same(got, tf.raw_ops.ClipByValue(t=x, clip_value_min=a, clip_value_max=b))


def test_clip_by_value_of_integers():
    x = np.array([-5, 0, 3, 9, 2**31 - 1, -(2**31)], np.int32)
    for lo, hi in ((0, 3), (4, 1), (-(2**31), 2**31 - 1)):
        a, b = np.int32(lo), np.int32(hi)
        _same(_run(lambda v, lo_, hi_: ops.ClipByValue(v, lo_, hi_), x, a, b)[0],
              tf.raw_ops.ClipByValue(t=x, clip_value_min=a, clip_value_max=b))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_relu6_of_negative_zero_at_every_size(dtype):
    for shape in [(), (1,), (2,), (3,), (4,), (5,), (7,), (8,), (9,), (15,), (16,), (17,), (3, 5), (100,), (1000,)]:
        n = int(np.prod(shape))
        x = _specials(n, dtype, seed=n).reshape(shape)
        x.reshape(-1)[-1:] = -0.0  # the scalar tail, when there is one, holds a -0.0
        _same(_run(lambda v: ops.Relu6(v), x)[0], tf.raw_ops.Relu6(features=x))
        zeros = np.full(shape, -0.0, dtype)
        _same(_run(lambda v: ops.Relu6(v), zeros)[0], tf.raw_ops.Relu6(features=zeros))


_I32 = np.array([0, 2, 1], np.int32)


@pytest.mark.parametrize("build, tf_call, inputs, message", [
    (lambda x: ops.Bitcast(x, type="bool"), lambda x: tf.raw_ops.Bitcast(input=x, type=tf.bool),
     [np.ones(3, np.uint8)], r"Bitcast 'Bitcast': attribute 'type' is bool, which TF's Bitcast refuses"),
    (lambda x: ops.Bitcast(x, type="uint8"), lambda x: tf.raw_ops.Bitcast(input=x, type=tf.uint8),
     [np.ones(3, bool)], r"Bitcast 'Bitcast': input 'x' is bool, which TF's Bitcast refuses"),
    (lambda i: ops.OneHot(i, Const(np.int32(3)), Const(np.ones(1, np.float32)), Const(np.float32(0))),
     lambda i: tf.raw_ops.OneHot(indices=i, depth=3, on_value=np.ones(1, np.float32), off_value=np.float32(0)),
     [_I32], (r"OneHot 'OneHot': on_value and off_value must be scalars \(shape \[\]\) of one dtype, got "
              r"float32\[1\] and float32\[\]")),
    (lambda x: ops.MatrixDiagPartV3(x, Const(np.int32(0)), Const(np.float32(0)), align="UP_DOWN"),
     lambda x: tf.raw_ops.MatrixDiagPartV3(input=x, k=0, padding_value=np.float32(0), align="UP_DOWN"),
     [np.ones((3, 3), np.float32)], r"MatrixDiagPartV3 'MatrixDiagPartV3': attribute 'align' is 'UP_DOWN'"),
    (lambda x: ops.MatrixDiagPartV3(x, Const(np.array([-1, 1], np.int32)), Const(np.float32(0))),
     lambda x: tf.raw_ops.MatrixDiagPartV3(input=x, k=np.array([-1, 1], np.int32), padding_value=np.float32(0)),
     [np.ones((0, 3), np.float32)], r"input 'k': the lower diagonal -1 is out of bounds for a 0x3 matrix"),
])
def test_what_tf_refuses_is_refused_naming_the_field(build, tf_call, inputs, message):
    with pytest.raises((tf.errors.InvalidArgumentError, TypeError, ValueError)):
        tf_call(*inputs)
    with pytest.raises(graph_ir.GraphError, match=message):
        _run(build, *inputs)


@pytest.mark.parametrize("build, inputs, message", [
    (lambda x: ops.ArgMaxV2(x, Const(np.int32(0))), [np.array([False, True])],
     r"ArgMaxV2 'ArgMaxV2': input 'x' has dtype bool, expected one of"),
    (lambda x: ops.Bitcast(x, type="bfloat16"), [np.ones(3, np.float16)],
     r"Bitcast 'Bitcast': attribute 'type' is bfloat16, expected one of"),
])
def test_what_tf_runs_but_ges_reg_op_forbids_is_refused(build, inputs, message):
    """TF runs ArgMax of bool and Bitcast to bfloat16; CANN's REG_OPs (third_party/cann/ge_reg_ops.txt) do not list
    bool for ArgMaxV2 (NumberType) nor DT_BF16 for Bitcast, so a GE file cannot hold them (docs/robustness.md)."""
    with pytest.raises(graph_ir.GraphError, match=message):
        _run(build, *inputs)


@pytest.mark.parametrize("shape, k", [((0, 3), 0), ((0, 3), [0, 1]), ((2, 0, 0), [0, 0]), ((3, 4), [-1, 1]),
                                      ((2, 4, 3), [-2, 1]), ((5, 2), [-3, -1])])
@pytest.mark.parametrize("align", ["RIGHT_LEFT", "LEFT_RIGHT", "LEFT_LEFT", "RIGHT_RIGHT"])
def test_matrix_diag_part_of_empty_matrices_and_bands_is_tfs(shape, k, align):
    x = _specials(int(np.prod(shape)), np.float32, seed=len(shape)).reshape(shape)
    k = np.asarray(k, np.int32)
    got = _run(lambda v: ops.MatrixDiagPartV3(v, Const(k), Const(np.float32(9)), align=align), x)[0]
    _same(got, tf.raw_ops.MatrixDiagPartV3(input=x, k=k, padding_value=np.float32(9), align=align))
