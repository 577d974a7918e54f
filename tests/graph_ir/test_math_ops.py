"""The math ops training steps need beyond the basic arithmetic (graph_ir/lowering/ops/math.py, trig.py): SqrtGrad,
L2Loss, Round, Min, bfloat16 AddV2 and the inverse and hyperbolic trigonometric functions, each alone in a
tf.function, lowered, run in graph_ir.Session and compared with TensorFlow on inputs with zeros, -0.0, ties, NaN,
+-inf, empty tensors, odd sizes and the domain edges (acos(+-1), acosh(1), atanh(+-1) = +-inf, NaN outside the
domain); then the gradient of each through tf.GradientTape, lowered as TF's gradient graph holds it.

Tolerances: 0 (bitwise, NaN at the same places) where the arithmetic is the same (SqrtGrad's (0.5 * dy) / y, a
rounding to an integer, a min, one addition). ROUNDING (2e-6 of the output's scale) for the transcendental functions:
the executors round the float64 function once (the correctly rounded float32, barring a rare tie) where TF uses
Eigen's float32 polynomials (atan, asin/acos, atanh) or the C library's float functions (tan, sinh, cosh, asinh,
acosh), each within a few ulps (an ulp of float32 is 6e-8 to 1.2e-7 of the value), so a few roundings apart at most;
NaN and +-inf must sit at the same places. PRODUCT (1e-5) for L2Loss: the float64 sum of squares rounded once (the
house rule for float32 sums) against Eigen's float32 tree sum (measured: within 3.1e-7 on sizes 17 to 77,000). In
float16 TF sums the squares in float16, a few float16 ulps from the exact sum that the executor rounds once: that
case has a test of its own."""

from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

from tests.graph_ir.test_activation_ops import _special, assert_matches, check_case, run_lowered
from tests.graph_ir.test_family_ops import PRODUCT, ROUNDING, _floats

BF16 = ml_dtypes.bfloat16
_EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, np.nan, np.inf, -np.inf, 1e-30, -1e-30]


def _with_edges(rng, n: int, scale: float = 1.0, dtype=np.float32, edges=_EDGES) -> np.ndarray:
    """n values (n >= len(edges)): the edges first, then uniform in [-scale, scale], as `dtype`."""
    x = rng.uniform(-scale, scale, n)
    x[:len(edges)] = edges
    return x.astype(dtype)


def _unit(rng, n: int = 61, dtype=np.float32):
    """For acos, asin, atanh: mostly inside [-1, 1], the edges +-1, and outside it (+-1.5, +-2.5, +-inf)."""
    return _with_edges(rng, n, 1.0, dtype)


def _from_one(rng, n: int = 61, dtype=np.float32):
    """For acosh: 1 (acosh(1) = 0), values above 1 up to 50, and below 1 (NaN: 0.5, 0, -1, -inf)."""
    x = 1 + np.abs(rng.standard_normal(n)) * 10
    x[:8] = [1.0, 1.0 + 2 ** -23, 0.5, 0.0, -1.0, np.nan, np.inf, -np.inf]
    return x.astype(dtype)


def _ties(rng, n: int = 67, dtype=np.float32):
    """For Round: every half-integer tie from -4.5 to 4.5, values just beside them, large values, NaN, +-inf."""
    halves = np.arange(-4.5, 5.0, 1.0)
    x = rng.standard_normal(n) * 6
    x[:halves.size] = halves
    x[halves.size:halves.size + 8] = [0.49999997, -0.49999997, 2.5000002, -0.0, 2 ** 23 + 1, -(2 ** 22) - 0.5, np.nan,
                                      np.inf]
    return x.astype(dtype)


def _grad_inputs(rng, n: int = 37, dtype=np.float32):
    """(y, dy) for SqrtGrad: y with zeros, inf, NaN; dy with zeros at some of those places and elsewhere."""
    y = np.abs(_special(rng, n)).astype(dtype)
    dy = _special(rng, n).astype(dtype)
    dy[::4] = 0
    return [y, dy]


def _sqrt_grad(y, dy):
    return tf.raw_ops.SqrtGrad(y=y, dy=dy)


def _atan2_inputs(rng):
    """Signed zeros, infinities and NaN in both arguments: every quadrant and axis of atan2, broadcast."""
    edges = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan], np.float32)
    y = np.concatenate([np.repeat(edges, edges.size), rng.standard_normal(30).astype(np.float32)])
    x = np.concatenate([np.tile(edges, edges.size), rng.standard_normal(30).astype(np.float32)])
    return [y.reshape(1, -1), x.reshape(1, -1) * np.ones((3, 1), np.float32)]


_UNARY_TRIG = {"Acos": (tf.math.acos, _unit), "Asin": (tf.math.asin, _unit), "Atanh": (tf.math.atanh, _unit),
               "Atan": (tf.math.atan, lambda r, dtype=np.float32: _with_edges(r, 61, 40.0, dtype)),
               "Tan": (tf.math.tan, lambda r, dtype=np.float32: _with_edges(r, 61, 7.0, dtype)),
               "Sinh": (tf.math.sinh, lambda r, dtype=np.float32: _with_edges(r, 61, 6.0, dtype)),
               "Cosh": (tf.math.cosh, lambda r, dtype=np.float32: _with_edges(r, 61, 6.0, dtype)),
               "Asinh": (tf.math.asinh, lambda r, dtype=np.float32: _with_edges(r, 61, 1e3, dtype)),
               "Acosh": (tf.math.acosh, _from_one)}

def _bf16(rng, *shape, scale: float = 3.0):
    return _special(rng, *shape, dtype=BF16, scale=scale)


def _bf16_finite(rng, *shape, positive: bool = False):
    x = _floats(rng, *shape) * 3
    return (np.abs(x) + 0.1 if positive else x).astype(BF16)


def _raw(op: str, first: str, second: str):
    return lambda a, b: getattr(tf.raw_ops, op)(**{first: a, second: b})


# The elementwise ops of a mixed_bfloat16 BERT / Llama block (attention, LayerNormalization or RMSNorm, gelu or
# SiLU, rotary sin/cos): each lowers in bfloat16, onto a GE op that declares it or in float32 between Casts
# (Maximum, Minimum, Sign, Floor, Erf, Erfc, Einsum) or as Sub + Square (SquaredDifference); bitwise TF's.
_BFLOAT16_BLOCK = {
    "Mul": (tf.multiply, lambda r: [_bf16(r, 5, 7), _bf16(r, 7)], 0),
    "Sub": (tf.subtract, lambda r: [_bf16(r, 5, 7), _bf16(r, 7)], 0),
    "RealDiv": (tf.divide, lambda r: [_bf16(r, 5, 7), _bf16(r, 7)], 0),
    # Eigen's packets round 1 / sqrt(x) once, its scalar tail twice: bitwise on whole packets (a multiple of 16)
    "Rsqrt": (tf.math.rsqrt, lambda r: [np.abs(_bf16(r, 320))], 0),
    "Sqrt": (tf.sqrt, lambda r: [np.abs(_bf16(r, 37))], 0),
    "Square": (tf.square, lambda r: [_bf16(r, 37)], 0),
    "Neg": (tf.negative, lambda r: [_bf16(r, 37)], 0),
    "Maximum": (tf.maximum, lambda r: [_bf16(r, 5, 7), _bf16(r, 7)], 0),
    "Minimum": (tf.minimum, lambda r: [_bf16(r, 5, 7), _bf16(r, 7)], 0),
    "Sign": (tf.sign, lambda r: [_bf16(r, 37)], 0),
    "Floor": (tf.floor, lambda r: [_bf16(r, 37)], 0),
    "SquaredDifference": (tf.math.squared_difference, lambda r: [_bf16(r, 5, 7), _bf16(r, 7)], 0),
    "Erf": (tf.math.erf, lambda r: [_bf16(r, 301)], 0),
    "Erfc": (tf.math.erfc, lambda r: [_bf16(r, 301)], 0),
    "Tanh": (tf.tanh, lambda r: [_bf16(r, 301)], 0),
    "Exp": (tf.exp, lambda r: [_bf16_finite(r, 37)], 0),
    "Sin": (tf.sin, lambda r: [_bf16_finite(r, 37)], 0),
    "Cos": (tf.cos, lambda r: [_bf16_finite(r, 37)], 0),
    "Mean": (lambda x: tf.reduce_mean(x, -1, keepdims=True), lambda r: [_bf16_finite(r, 5, 16)], 0),
    "Sum": (lambda x: tf.reduce_sum(x, 0), lambda r: [_bf16_finite(r, 5, 16)], 0),
    "Softmax": (tf.nn.softmax, lambda r: [_bf16_finite(r, 5, 16)], 0),
    "BatchMatMulV2": (tf.matmul, lambda r: [_bf16_finite(r, 2, 5, 8), _bf16_finite(r, 2, 8, 3)], 0),
    "Einsum": (lambda a, b: tf.einsum("abc,cd->abd", a, b), lambda r: [_bf16_finite(r, 2, 3, 8),
                                                                      _bf16_finite(r, 8, 4)], 0),
    "AddN": (lambda a, b, c: tf.add_n([a, b, c]), lambda r: [_bf16(r, 37), _bf16(r, 37), _bf16(r, 37)], 0),
    "Cast": (lambda x: tf.cast(x, tf.float32), lambda r: [_bf16(r, 37)], 0),
    # the gradients of tanh, sigmoid (gelu's tanh form, SiLU) and rsqrt (normalization), each step at 16 bits
    "TanhGrad": (_raw("TanhGrad", "y", "dy"), lambda r: [_bf16(r, 301, scale=0.5), _bf16(r, 301)], 0),
    # (SigmoidGrad: dy * (y * (1 - y)) in Eigen's packets, dy * y * (1 - y) in its tail: whole packets here)
    "SigmoidGrad": (_raw("SigmoidGrad", "y", "dy"), lambda r: [_bf16(r, 320, scale=0.5), _bf16(r, 320)], 0),
    "RsqrtGrad": (_raw("RsqrtGrad", "y", "dy"), lambda r: [np.abs(_bf16(r, 301)), _bf16(r, 301)], 0),
}
_FLOAT16_GRADIENTS = {f"{name}-float16": (fn, lambda r, make=make: [a.astype(np.float32).astype(np.float16)
                                                                    for a in make(r)], 0)
                      for name, (fn, make, _) in _BFLOAT16_BLOCK.items() if name.endswith("Grad")}

# "TFop" or "TFop-variant" -> (function of tensors, inputs from rng, tolerance)
CASES = {
    **{name: (fn, lambda r, make=make: [make(r)], ROUNDING) for name, (fn, make) in _UNARY_TRIG.items()},
    **{f"{name}-float64": (fn, lambda r, make=make: [make(r, dtype=np.float64)], ROUNDING)
       for name, (fn, make) in _UNARY_TRIG.items()},
    **{f"{name}-float16": (fn, lambda r, make=make: [make(r, dtype=np.float16)], ROUNDING)
       for name, (fn, make) in _UNARY_TRIG.items()},
    **{f"{name}-bfloat16": (fn, lambda r, make=make: [make(r, dtype=BF16)], ROUNDING)
       for name, (fn, make) in _UNARY_TRIG.items()},
    **{f"{name}-empty": (fn, lambda r: [np.zeros((3, 0), np.float32)], 0) for name, (fn, _) in _UNARY_TRIG.items()},
    "Sinh-overflow": (tf.math.sinh, lambda r: [_with_edges(r, 41, 120.0)], ROUNDING),
    "Cosh-overflow": (tf.math.cosh, lambda r: [_with_edges(r, 41, 120.0)], ROUNDING),
    "Atan2": (tf.math.atan2, _atan2_inputs, ROUNDING),
    "Atan2-float64": (tf.math.atan2, lambda r: [a.astype(np.float64) for a in _atan2_inputs(r)], ROUNDING),
    "Atan2-bfloat16": (tf.math.atan2, lambda r: [a.astype(BF16) for a in _atan2_inputs(r)], ROUNDING),
    "Atan2-empty": (tf.math.atan2, lambda r: [np.zeros((0, 3), np.float32), np.zeros((3,), np.float32)], 0),
    # Eigen's packets compute dy * (0.5 / y), its scalar tail (the last n % width elements) (0.5 * dy) / y: an ulp
    # apart there. The executor takes the packets' order: bitwise on whole packets (sizes a multiple of 16).
    "SqrtGrad": (_sqrt_grad, _grad_inputs, ROUNDING),
    "SqrtGrad-whole-packets": (_sqrt_grad, lambda r: _grad_inputs(r, 160), 0),
    "SqrtGrad-float16-whole-packets": (_sqrt_grad, lambda r: _grad_inputs(r, 320, np.float16), 0),
    "SqrtGrad-bfloat16-whole-packets": (_sqrt_grad, lambda r: _grad_inputs(r, 320, BF16), 0),
    "SqrtGrad-float64-whole-packets": (_sqrt_grad, lambda r: _grad_inputs(r, 48, np.float64), 0),
    "SqrtGrad-empty": (_sqrt_grad, lambda r: [np.zeros((2, 0), np.float32)] * 2, 0),
    "L2Loss": (tf.nn.l2_loss, lambda r: [_floats(r, 3, 37) * 3], PRODUCT),
    "L2Loss-large": (tf.nn.l2_loss, lambda r: [_floats(r, 301, 257)], PRODUCT),
    "L2Loss-float64": (tf.nn.l2_loss, lambda r: [_floats(r, 5, 9).astype(np.float64)], 0),
    "L2Loss-nan": (tf.nn.l2_loss, lambda r: [np.array([1.0, np.nan, 2.0], np.float32)], 0),
    "L2Loss-inf": (tf.nn.l2_loss, lambda r: [np.array([[1.0, -np.inf], [2.0, 0.0]], np.float32)], 0),
    "L2Loss-overflow": (tf.nn.l2_loss, lambda r: [np.array([3e19, 1.0], np.float32)], 0),
    "L2Loss-empty": (tf.nn.l2_loss, lambda r: [np.zeros((4, 0), np.float32)], 0),
    "L2Loss-scalar": (tf.nn.l2_loss, lambda r: [np.float32(-3.5)], 0),
    "Round": (tf.round, lambda r: [_ties(r)], 0),
    "Round-float16": (tf.round, lambda r: [_ties(r, dtype=np.float16)], 0),
    "Round-bfloat16": (tf.round, lambda r: [_ties(r, dtype=BF16)], 0),
    "Round-float64": (tf.round, lambda r: [_ties(r, dtype=np.float64)], 0),
    "Round-empty": (tf.round, lambda r: [np.zeros((0,), np.float32)], 0),
    "Min": (lambda x: tf.reduce_min(x, axis=-1), lambda r: [_special(r, 5, 7)], 0),
    "Min-keepdims": (lambda x: tf.reduce_min(x, axis=[0, 2], keepdims=True), lambda r: [_special(r, 3, 4, 5)], 0),
    "Min-all": (tf.reduce_min, lambda r: [_floats(r, 4, 3)], 0),
    "Min-int32": (lambda x: tf.reduce_min(x, axis=0), lambda r: [r.integers(-99, 99, (5, 3)).astype(np.int32)], 0),
    "Min-empty-axis": (lambda x: tf.reduce_min(x, axis=1), lambda r: [np.zeros((3, 0), np.float32)], 0),
    "Min-empty-axis-int32": (lambda x: tf.reduce_min(x, axis=1), lambda r: [np.zeros((3, 0), np.int32)], 0),
    "Min-bfloat16": (lambda x: tf.reduce_min(x, axis=0), lambda r: [_special(r, 5, 3, dtype=BF16)], 0),
    "AddV2-bfloat16": (tf.add, lambda r: [_special(r, 5, 7, dtype=BF16), _special(r, 7, dtype=BF16)], 0),
    "AddV2-bfloat16-empty": (tf.add, lambda r: [np.zeros((0, 3), BF16), np.zeros((3,), BF16)], 0),
    **{f"{name}-bfloat16": case for name, case in _BFLOAT16_BLOCK.items()},
    **_FLOAT16_GRADIENTS,
    # float32, where NumPy's exp, sin, cos and 1/sqrt and Eigen's approximations may be an ulp apart (docs/lowering.md's 2e-6)
    "Exp-float32": (tf.exp, lambda r: [_floats(r, 37) * 3], ROUNDING),
    "Sin-float32": (tf.sin, lambda r: [_floats(r, 37) * 3], ROUNDING),
    "Cos-float32": (tf.cos, lambda r: [_floats(r, 37) * 3], ROUNDING),
    "Rsqrt-float32": (tf.math.rsqrt, lambda r: [np.abs(_floats(r, 37)) + 0.5], ROUNDING),
}


# bfloat16 ops that lower onto another GE op: GE's AddV2 declares no bfloat16, its Add does; bfloat16
# SquaredDifference is Sub then Square.
BFLOAT16_GE_TYPES = {"AddV2": "Add", "SquaredDifference": "Square"}


@pytest.mark.parametrize("name", list(CASES))
def test_lowered_op_runs_like_tensorflow(name):
    ge_type = BFLOAT16_GE_TYPES.get(name.split("-")[0]) if "bfloat16" in name else None
    check_case(name, CASES[name], ge_type, any_zero_sign=name in ZERO_SIGN_BY_LAYOUT)


# max(0.0, -0.0) and min: which zero TF returns depends on the argument order in Eigen's packets and its tail, as
# for Relu (tests/graph_ir/test_activation_ops.py): a zero of either sign is accepted there.
ZERO_SIGN_BY_LAYOUT = {"Maximum-bfloat16", "Minimum-bfloat16"}


def _gradient(fn):
    """The gradients of sum(fn(*xs) * weights) with respect to every x (weights: a fixed pattern, so each element's
    gradient differs)."""

    def step(*xs):
        with tf.GradientTape() as tape:
            tape.watch(xs)
            y = fn(*xs)
            loss = tf.reduce_sum(y * tf.cast(tf.reshape(tf.range(tf.size(y)) % 5 - 2, tf.shape(y)), y.dtype))
        return tape.gradient(loss, xs)

    return step


# TF op -> (function, inputs, tolerance): the gradient graphs hold Reciprocal, Sqrt, Square, Sub, Neg, Cos, Cosh,
# Sinh, RealDiv, AddV2, Sum and Reshape (Atan2's broadcast), SqrtGrad, L2Loss's Mul, Min's Equal/Cast/RealDiv.
# (Round has no gradient in TF: tape.gradient gives None.)
GRADIENTS = {
    **{name: (fn, lambda r, make=make: [make(r)], ROUNDING) for name, (fn, make) in _UNARY_TRIG.items()},
    "Atan2": (tf.math.atan2, lambda r: [_floats(r, 3, 5), _floats(r, 5) + 0.5], ROUNDING),
    "Sqrt": (tf.sqrt, lambda r: [np.abs(_special(r, 37))], ROUNDING),
    "L2Loss": (tf.nn.l2_loss, lambda r: [_floats(r, 4, 9)], 0),
    "Min": (lambda x: tf.reduce_min(x, axis=1), lambda r: [np.round(_floats(r, 4, 6))], 0),  # ties share the gradient
}


@pytest.mark.parametrize("name", list(GRADIENTS))
def test_gradient_through_the_op_lowers_and_runs_like_tensorflow(name):
    fn, make_inputs, tolerance = GRADIENTS[name]
    inputs = make_inputs(np.random.default_rng(zlib.crc32(f"grad-{name}".encode())))
    _, got, want = run_lowered(_gradient(fn), inputs)
    assert len(got) == len(want) == len(inputs)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_matches(g, w, tolerance, f"gradient of {name} with respect to input {k}")


def test_bfloat16_ops_ge_does_not_declare_run_in_float32_between_casts():
    """GE's Acos, Asin, Tan, Atan2 and Round declare no bfloat16: Cast to float32, the op, Cast back."""
    for fn, ge_type, inputs in ((tf.math.acos, "Acos", [np.zeros(3, BF16)]), (tf.round, "Round", [np.zeros(3, BF16)]),
                                (tf.math.atan2, "Atan2", [np.zeros(3, BF16), np.ones(3, BF16)])):
        graph, _, _ = run_lowered(fn, inputs)
        (node,) = graph.nodes_of_type(ge_type)
        assert node.output_descs[0].dtype.name == "float32"
        assert all(h.node.type == "Cast" for h in node.inputs)


def test_l2_loss_in_bfloat16_is_refused_naming_the_node():  # GE's L2Loss declares FloatingDataType: no bfloat16
    import graph_ir

    with pytest.raises(graph_ir.LoweringError, match=r"TF L2Loss '.*L2Loss'.*bfloat16"):
        graph_ir.from_tensorflow(tf.function(tf.nn.l2_loss), tf.TensorSpec((4,), tf.bfloat16))


def test_integer_round_is_refused_naming_the_node():
    """TF's CPU Round kernel returns 0 for every int32 / int64 element (GE's Round returns x): refused, not lowered to
    a different result. tf.round returns an integer tensor unchanged, so only tf.raw_ops.Round meets this."""
    import graph_ir

    x = np.array([2, -4, 3], np.int32)
    assert not tf.raw_ops.Round(x=x).numpy().any()  # what TF's kernel gives: zeros
    with pytest.raises(graph_ir.LoweringError, match=r"TF Round 'Round'.*int32.*returns 0"):
        graph_ir.from_tensorflow(tf.function(lambda x: tf.raw_ops.Round(x=x)), tf.TensorSpec((3,), tf.int32))


def test_float16_l2_loss_is_within_float16_rounding_of_tensorflow():
    """TF's float16 L2Loss sums the halved squares in float16 (Eigen's half sum), a few float16 ulps (2^-11 each) from
    the exact sum; the executor rounds the float64 sum once. Measured: within 1e-3 of the value; asserted 2e-3."""
    rng = np.random.default_rng(16)
    for shape in ((7, 9), (61,), (3, 0)):
        x = (_floats(rng, *shape) * 2).astype(np.float16) if 0 not in shape else np.zeros(shape, np.float16)
        _, got, want = run_lowered(tf.nn.l2_loss, [x])
        assert got[0].dtype == want[0].dtype == np.float16 and got[0].shape == ()
        assert abs(float(got[0]) - float(want[0])) <= 2e-3 * abs(float(want[0])), (shape, got[0], want[0])
