"""The math, array, nn and norm executors on hostile values (NaN, +-inf, signed zeros, empty batches, zero divisors,
ids and exponents TF refuses): each graph is built with the builders, saved and loaded back (graph_ir.loads), run in
graph_ir.Session and compared with tf.raw_ops on the same inputs: bitwise (NaN where TF has NaN, the sign of every
zero) where the arithmetic is TF's; where TF refuses the input, the session refuses it with a GraphError naming the
node."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import ops

NAN, INF = np.nan, np.inf
# Every float pair TF's division-like kernels treat specially, plus plain values: zeros of both signs, infinities,
# NaN, a quotient (1 / 0.1) that rounds up to an integer.
_X = [1, INF, -INF, 1, -1, 0, -0.0, NAN, 5, -4, 4, -1, 3, 7.5, -7.5, 1e30, 0.3]
_Y = [0.1, 2, 2, 0, 0, 0, 3, 1, -INF, 2, -2, INF, 0.7, -2, 2, 1e-30, 0.1]


def _run(build, *inputs: np.ndarray) -> list[np.ndarray]:
    """Builds a graph over Data inputs, round-trips it through a file's bytes, runs it."""
    graph = graph_ir.Graph("values")
    with graph:
        data = [graph_ir.Data(k, x.dtype, x.shape, name=f"in{k}") for k, x in enumerate(inputs)]
        out = build(*data)
        graph.set_outputs(list(out) if isinstance(out, tuple) else [out])
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.loads(graph.serialize()))
    return session.run_graph(0, list(inputs))


def _same(got: np.ndarray, want, signed_zeros: bool = True) -> None:
    """Bitwise but for NaN payloads: same dtype and shape, NaN in the same places, every other value and (unless
    told) the sign of every zero equal."""
    want = np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    keep = ~np.isnan(w)
    np.testing.assert_array_equal(g[keep], w[keep])
    if signed_zeros:
        np.testing.assert_array_equal(np.signbit(g[keep]), np.signbit(w[keep]))


def _floats(dtype, values, rng=None, extra: int = 0) -> np.ndarray:
    rng = rng or np.random.default_rng(7)
    with np.errstate(over="ignore"):  # 1e30 is inf in float16
        return np.concatenate([np.array(values, np.float64), rng.standard_normal(extra) * 3]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_relu_keeps_nan(dtype):
    """Relu(NaN) is NaN. The sign of Relu(-0.0) is not compared: TF's own depends on the element's position (+0.0 in
    Eigen's SIMD packets, -0.0 in the tail); graph_ir gives +0.0."""
    x = _floats(dtype, [NAN, -0.0, 0.0, -INF, INF, -1, 1, -1e-30, NAN], extra=24)
    got = _run(ops.Relu, x)[0]
    _same(got, tf.raw_ops.Relu(features=x).numpy(), signed_zeros=False)
    assert not np.signbit(got[~np.isnan(got)]).any()


def test_relu_grad_multiplies_the_gradient_as_tf():
    """gradients * (features > 0): a NaN gradient, or an inf one where features <= 0, gives NaN; a NaN feature 0."""
    dy = _floats(np.float32, [NAN, INF, -INF, NAN, INF, 1, 1, -1, -2, 0, -0.0], extra=6)
    x = _floats(np.float32, [1, 1, 1, -1, -1, NAN, 0, -1, -0.0, 2, 2], extra=6)
    _same(_run(ops.ReluGrad, dy, x)[0], tf.raw_ops.ReluGrad(gradients=dy, features=x).numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_activation_gradients_where_dy_is_zero(dtype):
    """RsqrtGrad is 0 where dy is 0, even for y = inf or NaN (Eigen's rsqrt gradient); Sigmoid and Tanh's are not."""
    y = _floats(dtype, [INF, INF, 0, NAN, -INF, INF, 2, -0.0, 0.5, 1e4])
    dy = _floats(dtype, [0, -0.0, INF, 0, 0, 1, NAN, 3, -0.0, 2])
    got = _run(lambda a, b: (ops.RsqrtGrad(a, b), ops.SigmoidGrad(a, b), ops.TanhGrad(a, b)), y, dy)
    for g, fn in zip(got, (tf.raw_ops.RsqrtGrad, tf.raw_ops.SigmoidGrad, tf.raw_ops.TanhGrad), strict=True):
        _same(g, fn(y=y, dy=dy).numpy())


_SOFTMAX_ROWS = [[INF, 1, 2], [-INF, 1, 2], [NAN, 1, 2], [-INF, -INF, -INF], [INF, INF, 1], [INF, -INF, 0],
                 [1, INF, 2], [1, 2, NAN], [NAN, NAN, 1], [-INF, NAN, 1], [-INF, -INF, 1], [INF, INF, INF],
                 [NAN, NAN, NAN], [1e38, -1e38, 0], [1, 2, 3], [0, 0, 0]]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64])
def test_softmax_rows_with_inf_and_nan(dtype):
    """Exactly TF's NaNs: oneDNN's softmax where TF runs it for the dtype, Eigen's (such rows all NaN) where it does
    not: float64, float16 on a CPU without AVX512-FP16 (an AMD EPYC), every dtype with TF_ENABLE_ONEDNN_OPTS=0 (.ci/run
    runs this test so too)."""
    with np.errstate(over="ignore"):
        x = np.array(_SOFTMAX_ROWS, np.float64).astype(dtype)
    got = _run(ops.SoftmaxV2, x)[0]
    want = tf.raw_ops.Softmax(logits=x).numpy()
    assert got.dtype == want.dtype
    got, want = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))  # exactly TF's NaNs
    exact = (want == 0) | (want == 1)
    np.testing.assert_array_equal(got[exact], want[exact])  # and its exact 0s and 1s
    tolerance = {np.float64: 1e-15, np.float32: 2e-7}.get(dtype, 1e-2)  # exp's rounding elsewhere
    np.testing.assert_allclose(got, want, rtol=0, atol=tolerance)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_float_floor_div_and_floor_mod_follow_tf(dtype):
    """floor(x / y) of the rounded quotient (1 // 0.1 = 10, inf // 2 = inf) and TF's remainder rule (the sign of
    fmod's zero: -4 mod 2 = -0.0)."""
    rng = np.random.default_rng(3)
    x = _floats(dtype, _X, rng, extra=20)
    y = _floats(dtype, _Y, rng, extra=20)
    floor_div, floor_mod = _run(lambda a, b: (ops.FloorDiv(a, b), ops.FloorMod(a, b)), x, y)
    _same(floor_div, tf.raw_ops.FloorDiv(x=x, y=y).numpy())
    _same(floor_mod, tf.raw_ops.FloorMod(x=x, y=y).numpy())


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_division_follows_tf(dtype):
    rng = np.random.default_rng(5)
    info = np.iinfo(dtype)
    x = np.concatenate([[7, -7, 7, -7, 0, info.max, info.min + 1, info.max - 1], rng.integers(-99, 99, 24)])
    y = np.concatenate([[2, 2, -2, -2, 5, 3, 7, info.max], rng.choice([-5, -3, -1, 1, 2, 9], 24)])
    x, y = x.astype(dtype), y.astype(dtype)
    got = _run(lambda a, b: (ops.FloorDiv(a, b), ops.FloorMod(a, b), ops.RealDiv(a, b)), x, y)
    _same(got[0], tf.raw_ops.FloorDiv(x=x, y=y).numpy())
    _same(got[1], tf.raw_ops.FloorMod(x=x, y=y).numpy())
    _same(got[2], tf.raw_ops.Div(x=x, y=y).numpy())  # TF has no integer RealDiv kernel: Div, truncating


_ZERO_DIVISIONS = [(t, d) for t in ("FloorDiv", "FloorMod", "RealDiv") for d in (np.int32, np.int64, np.uint8)
                   if (t, d) != ("FloorMod", np.uint8)]  # FloorMod takes no uint8


@pytest.mark.parametrize(("op_type", "dtype"), _ZERO_DIVISIONS)
def test_integer_division_by_zero_is_refused(op_type, dtype):
    x, y = np.array([1, 2, 3], dtype), np.array([1, 0, 1], dtype)
    with pytest.raises(graph_ir.GraphError, match=rf"{op_type} 'div': integer division by zero \(x2\[1\] is 0"):
        _run(lambda a, b: getattr(ops, op_type)(a, b, name="div"), x, y)
    tf_op = tf.raw_ops.Div if op_type == "RealDiv" else getattr(tf.raw_ops, op_type)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Integer division by zero"):
        tf_op(x=x, y=y)


def test_integer_pow_to_a_negative_power_is_refused():
    x, y = np.array([1, 2, 3], np.int32), np.array([2, -1, 0], np.int32)
    with pytest.raises(graph_ir.GraphError, match=r"Pow 'pow': integers to negative integer powers are not allowed"):
        _run(lambda a, b: ops.Pow(a, b, name="pow"), x, y)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Integers to negative integer powers are not allowed"):
        tf.raw_ops.Pow(x=x, y=y)
    y = np.array([2, 5, 0], np.int32)
    _same(_run(ops.Pow, x, y)[0], tf.raw_ops.Pow(x=x, y=y).numpy())


def test_unsorted_segment_sum_ids():
    """Negative ids are dropped and ids >= num_segments refused, as TF's CPU kernel does."""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)

    def build(data, ids, count):
        return lambda a: ops.UnsortedSegmentSum(a, graph_ir.Const(np.array(ids, np.int32)),
                                                graph_ir.Const(np.int32(count)), name="uss")

    ids = [2, -1, 0, 2]
    _same(_run(build(x, ids, 3), x)[0], tf.raw_ops.UnsortedSegmentSum(data=x, segment_ids=ids, num_segments=3).numpy())
    with pytest.raises(graph_ir.GraphError, match=r"UnsortedSegmentSum 'uss': segment_ids\[1\] = 3 is out of range "
                                                  r"\[0, 3\)"):
        _run(build(x, [0, 3, 1, 1], 3), x)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"segment_ids\[1\] = 3 is out of range \[0, 3\)"):
        tf.raw_ops.UnsortedSegmentSum(data=x, segment_ids=[0, 3, 1, 1], num_segments=3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_reductions_of_an_empty_input_give_tf_identities(dtype):
    """max: -inf (the lowest integer); mean: NaN (0 for integers); sum 0; prod 1."""
    x = np.zeros((0, 3), dtype)
    axis = np.array([0], np.int32)
    got = _run(lambda a: tuple(getattr(ops, t)(a, graph_ir.Const(axis)) for t in
                               ("ReduceMax", "ReduceMean", "ReduceSum", "ReduceProd")), x)
    for g, fn in zip(got, (tf.raw_ops.Max, tf.raw_ops.Mean, tf.raw_ops.Sum, tf.raw_ops.Prod), strict=True):
        _same(g, fn(input=x, axis=axis).numpy())


_RANGES = {
    "float32": [(0.1, 100.0, 0.1), (-3.7, 81.0, 0.37), (5.0, -7.1, -0.013), (1e6 + 0.5, 1e6 + 91.0, 0.3)],
    "float64": [(0.1, 100.0, 0.1), (-3.7, 81.0, 0.37), (5.0, -7.1, -0.013)],
    "float16": [(0.0, 180.0, 0.3), (-2.5, 60.0, 0.7)],
    "bfloat16": [(0.0, 180.0, 0.3), (-2.5, 60.0, 0.7)],
    "int32": [(-2**31, 2**31 - 1, 2**30), (3, -20, -7), (0, 10, 3)],
    "int64": [(0, 10, 2**62), (-2**63, 2**63 - 1, 2**62), (-2**63, 2**63 - 1, 2**63 - 1), (5, 100, 7)],
}


@pytest.mark.parametrize("dtype", list(_RANGES))
def test_range_values_are_tfs_bitwise(dtype):
    """start + T(i) * delta rounded in the dtype, and TF's length, including ranges whose limit - start overflows
    int64 (Python ints: Range(0, 10, 2**62) is [0])."""
    t = graph_ir.ir.dtypes.as_dtype(dtype).numpy
    for start, limit, delta in _RANGES[dtype]:
        values = [np.array(v).astype(t) for v in (start, limit, delta)]
        graph = graph_ir.Graph("range")
        with graph:
            graph.set_outputs([ops.Range(*[graph_ir.Const(v) for v in values], name="range")])
        session = graph_ir.Session()
        session.add_graph(0, graph_ir.loads(graph.serialize()))
        want = tf.raw_ops.Range(start=tf.constant(values[0]), limit=tf.constant(values[1]),
                                delta=tf.constant(values[2])).numpy()
        _same(session.run_graph(0, [])[0], want)


@pytest.mark.parametrize("is_training", [True, False])
@pytest.mark.parametrize("shape", [(0, 2, 2, 3), (2, 0, 5, 3)])
def test_batch_norm_on_an_empty_batch(is_training, shape):
    """TF: y empty, batch mean and variance NaN, the saved ones 0; the gradients of scale and offset 0."""
    x = np.zeros(shape, np.float32)
    scale, offset = np.array([1, 2, 3], np.float32), np.array([0.5, 0, -1], np.float32)
    mean, variance = np.array([2, 1, 0], np.float32), np.array([1, 4, 2], np.float32)

    def forward(a):
        return ops.BatchNorm(a, scale, offset, mean, variance, epsilon=1e-3, is_training=is_training)

    def backward(dy, a):
        return ops.BatchNormGrad(dy, a, scale, mean, variance, epsilon=1e-3, is_training=is_training)

    want = tf.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=mean, variance=variance, epsilon=1e-3,
                                       is_training=is_training)
    for g, w in zip(_run(forward, x), want, strict=True):
        _same(g, w.numpy())
    want = tf.raw_ops.FusedBatchNormGradV3(y_backprop=x, x=x, scale=scale, reserve_space_1=mean,
                                           reserve_space_2=variance, reserve_space_3=np.zeros(0, np.float32),
                                           epsilon=1e-3, is_training=is_training)
    for g, w in zip(_run(backward, x, x), want, strict=True):
        _same(g, w.numpy())


@pytest.mark.parametrize("shape", [(3, 0), (0, 4), (0, 0)])
def test_softmax_and_its_cross_entropy_on_empty_inputs(shape):
    x = np.zeros(shape, np.float32)
    _same(_run(ops.SoftmaxV2, x)[0], tf.raw_ops.Softmax(logits=x).numpy())
    labels = np.zeros(shape[0], np.int32)

    def xent(f):
        return ops.SparseSoftmaxCrossEntropyWithLogits(f, graph_ir.Const(labels), name="xent")

    if shape[1] == 0:  # no classes: TF refuses it
        with pytest.raises(graph_ir.GraphError, match=r"SparseSoftmaxCrossEntropyWithLogits 'xent': features must "
                                                      r"have at least one class, got shape \[\d, 0\]"):
            _run(xent, x)
        with pytest.raises(tf.errors.InvalidArgumentError, match="Must have at least one class"):
            tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=x, labels=labels)
        return
    want = tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=x, labels=labels)
    for g, w in zip(_run(xent, x), want, strict=True):
        _same(g, w.numpy())


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8])
def test_integer_mean_is_tfs_exact_quotient(dtype):
    """TF's integer Mean: the exact sum (int64's wraps) divided toward zero; np.mean would round int64 values."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(9)
    x = rng.integers(info.min, info.max, (6, 7), dtype=dtype, endpoint=True)
    x[0, :3] = [info.max, info.max, 1]
    x[1, :3] = [info.min, info.min + 1, 0]
    x[2] = 0 if info.min == 0 else -1
    for axes in ([1], [0, 1]):
        axis = np.array(axes, np.int32)
        _same(_run(lambda a, k=axis: ops.ReduceMean(a, graph_ir.Const(k)), x)[0],
              tf.raw_ops.Mean(input=x, axis=axis).numpy())
