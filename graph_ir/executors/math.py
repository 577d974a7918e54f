"""The math family's executors (prototypes: graph_ir/opset/math.py). Elementwise arithmetic runs at the inputs'
dtype as NumPy does it, which for + - * / and sqrt is IEEE's correctly rounded result, as in TensorFlow. The
activation gradients follow the operation order of TensorFlow's CPU kernels (Eigen's gradient functors), so that
they round alike. Transcendental functions (exp, tanh, sigmoid, erf) are not bitwise TF's (Eigen uses its own
polynomial approximations); the reductions (reduce.py) sum floats in float64, at least as close to the exact sum
as TF's: the lowering tests state their tolerances."""

from __future__ import annotations

import math

import numpy as np

from graph_ir import _binding
from graph_ir.executors import reduce
from graph_ir.executors import threads as executor_threads
from graph_ir.executors.common import Executor, at_dtype, elementwise, scalar_tail, times_mask, wide, widened
from graph_ir.executors.reduce import trunc_div
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Node


def _is_int(a: np.ndarray) -> bool:
    return a.dtype.kind in "iu"


def _check_int_divisor(node: Node, y: np.ndarray) -> None:
    if _is_int(y) and not np.all(y):
        k = int(np.argmin(y.reshape(-1) != 0))
        raise GraphError(f"{node.type} {node.name!r}: integer division by zero (x2[{k}] is 0 after flattening); TF "
                         "refuses it too")


def _floor_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """TF's FloorDiv: floor(x / y) of the rounded quotient for floats (1 // 0.1 is 10, inf // 2 is inf), Python's
    floor division for integers (tensorflow/core/kernels/cwise_ops.h, google_floor_div_real / google_floor_div)."""
    return np.floor_divide(x, y) if _is_int(x) else np.floor(x / y)


def _floor_mod(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """TF's FloorMod: the truncated remainder, plus y where it is nonzero and its sign differs from y's (so -4 mod 2
    is -0.0, the sign of fmod's zero, where NumPy's mod gives +0.0)."""
    if _is_int(x):
        return np.mod(x, y)  # the same rule for integers
    r = np.fmod(x, y)
    return np.where((r != 0) & ((y < 0) != (r < 0)), r + y, r)


def _div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return trunc_div(x, y) if _is_int(x) else np.divide(x, y)


def _checked(fn, check) -> Executor:
    """An elementwise executor that first refuses the inputs TF's kernel refuses (check raises naming the node)."""

    def run(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        check(node, *args)
        with np.errstate(all="ignore"):
            return [at_dtype(node, 0, fn(*args))]

    return run


def _check_pow(node: Node, x: np.ndarray, y: np.ndarray) -> None:
    if y.dtype.kind == "i" and np.any(y < 0):
        raise GraphError(f"Pow {node.name!r}: integers to negative integer powers are not allowed (x2 holds "
                         f"{int(y.min())}); TF refuses them too")


def _scaled(node: Node, x: np.ndarray) -> np.ndarray:
    """scale * x + shift of GE's Exp and Log (x itself for the defaults 1 and 0, what TF's ops lower to)."""
    a = node.attrs
    return x if (a["scale"], a["shift"]) == (1.0, 0.0) else x * a["scale"] + a["shift"]


def _exp(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    a, x = node.attrs, _scaled(node, args[0])
    with np.errstate(all="ignore"):
        y = np.exp(x) if a["base"] == -1.0 else np.power(np.asarray(a["base"], x.dtype), x)
    return [at_dtype(node, 0, y)]


def _log(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    a, x = node.attrs, _scaled(node, args[0])
    with np.errstate(all="ignore"):
        y = np.log(x) if a["base"] == -1.0 else np.log(x) / np.log(np.asarray(a["base"], x.dtype))
    return [at_dtype(node, 0, y)]


def _div_no_nan(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where(y == 0, np.zeros((), x.dtype), _div(x, np.where(y == 0, np.ones((), y.dtype), y)))


def _relu(x: np.ndarray) -> np.ndarray:
    """max(x, 0) as TF's Relu: NaN stays NaN (np.maximum propagates it) and -0.0 gives +0.0, as in Eigen's SIMD
    packets (adding +0.0 turns a zero of either sign into +0.0, whichever np.maximum returns on the tie). Two
    vectorized passes: np.where branches per element, several times slower on mixed signs."""
    zero = np.zeros((), x.dtype)
    y = np.maximum(x, zero)
    return np.add(y, zero, out=y) if isinstance(y, np.ndarray) else y + zero


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


_ERF = np.vectorize(math.erf, otypes=[np.float64])
_ERFC = np.vectorize(math.erfc, otypes=[np.float64])


def _erf_executor(complement: bool) -> Executor:
    """Erf (Erfc when complement): float64 through math.erf / math.erfc; float32 and the 16-bit floats (widened to
    float32) in the binding's C++ (std::erf / std::erfc evaluated in double over the contiguous array, without the
    GIL, on the session's threads), rounded once to the output dtype: float32 directly, the 16-bit floats from the
    double result. NaN stays NaN; +-inf give +-1 and 0 / 2."""
    exact = _ERFC if complement else _ERF

    def run(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        x = args[0]
        if x.dtype == np.float64:
            return [at_dtype(node, 0, exact(x))]
        x = np.ascontiguousarray(wide(x), np.float32)  # C-contiguous, native byte order: what the binding accepts
        out = np.empty(x.shape, np.float32 if args[0].dtype == np.float32 else np.float64)
        _binding.erf_float32(x, out, complement, executor_threads.count())
        return [at_dtype(node, 0, out)]

    return run


def _l2_loss(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """sum(x ** 2) / 2 (TF's l2loss_op.h: (x.square() * 0.5).sum()). float16 and float32: the squares and their sum
    in float64, rounded once (the house rule for float sums, reduce.py; TF's Eigen tree sum of float32 halves is
    within a few ulps of it); float64 in TF's order at float64. Empty: 0. NaN and inf flow through."""
    x = args[0]
    with np.errstate(all="ignore"):
        if x.dtype == np.float64:
            return [at_dtype(node, 0, np.sum(np.square(x) * 0.5))]
        wide64 = x.astype(np.float64).reshape(-1)
        return [at_dtype(node, 0, np.dot(wide64, wide64) * 0.5)]


def _sqrt_grad(y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """GE's z = dy * 0.5 / y in the order of TF's scalar_sqrt_gradient_op (tensorflow/core/kernels/
    cwise_ops_gradients.h) in its SIMD packets: dy * (0.5 / y), two roundings at the dtype (measured bitwise TF's on
    whole packets in all four float dtypes); Eigen's scalar tail (the last n % width elements) computes
    (0.5 * dy) / y, an ulp apart in about a quarter of them. 0 where dy is 0, even where y is 0, inf or NaN."""
    return np.where(dy == 0, np.zeros((), dy.dtype), dy * (np.asarray(0.5, y.dtype) / y))


def _add_n(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    total = args[0].copy()
    with np.errstate(all="ignore"):
        for a in args[1:]:  # left to right, as TF's AddN kernel adds
            total += a
    return [total]


def _negative(x: np.ndarray) -> np.ndarray:
    """-x as a sign flip for float32 and float64 (as TF's xor: a subnormal stays one under DAZ, where NumPy's
    negative reads it as 0: graph_ir/executors/denormals.py)."""
    if x.dtype not in (np.float32, np.float64):
        return np.negative(x)
    bits = np.dtype(f"u{x.itemsize}")
    return np.bitwise_xor(x.view(bits), bits.type(1 << (8 * x.itemsize - 1))).view(x.dtype)


def _sign(x: np.ndarray) -> np.ndarray:
    """sign(x), and where x == 0 (its zeros, and under DAZ its subnormals) what TF returns (measured): |x| from
    Eigen's AVX packets, +0.0 from its scalar tail, for float32 and float64."""
    if x.dtype not in (np.float32, np.float64):
        return np.sign(x)
    y = np.where(x == 0, np.abs(x), np.sign(x)).copy(order="C")  # C order: the tail is a flat view's end
    tail = scalar_tail(x)
    if tail:
        flat = y.reshape(-1)[-tail:]
        flat[flat == 0] = 0
    return y


_BINARY = {"Add": np.add, "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply,
           "Maximum": np.maximum, "Minimum": np.minimum, "Less": np.less, "LessEqual": np.less_equal, "Greater": np.greater,
           "GreaterEqual": np.greater_equal, "Equal": np.equal, "NotEqual": np.not_equal, "DivNoNan": _div_no_nan,
           "SquaredDifference": lambda x, y: np.square(x - y)}
_UNARY = {"Cos": np.cos, "Sin": np.sin, "Sqrt": np.sqrt, "Square": np.square,
          "Neg": _negative, "Abs": np.abs, "Sign": _sign, "Floor": np.floor,
          "Relu": _relu, "SqrtGrad": _sqrt_grad,
          # Round: half to even (np.rint), as TF's Round (Eigen's scalar_round_half_to_even_op); integers as given.
          "Round": lambda x: np.rint(x) if x.dtype.kind in "fV" else x.copy()}
# In float32 and rounded once: how TF evaluates them for 16-bit floats.
_WIDENED = {"Sigmoid": _sigmoid, "Tanh": np.tanh,
            # 1 / sqrt(x) rounded once for the 16-bit floats: measured bitwise TF's float16 and bfloat16 Rsqrt
            # (two roundings at 16 bits are an ulp off in a quarter of the elements)
            "Rsqrt": lambda x: 1 / np.sqrt(x)}
# Eigen's gradient functors, in their operation order, each step rounded at the inputs' dtype: for float16 and
# bfloat16 that is TF's result bit for bit (measured over 4096 elements of each; float32 once and rounded is an ulp
# off in a quarter to a third of them).
_GRADIENTS = {"SigmoidGrad": lambda y, dy: dy * (y * (1 - y)),
              "TanhGrad": lambda y, dy: dy * (1 - y * y),
              # Eigen's scalar_rsqrt_gradient_op gives 0 where dy is 0 (even where y is inf or NaN).
              "RsqrtGrad": lambda y, dy: np.where(dy == 0, np.zeros((), dy.dtype),
                                                  np.asarray(-0.5, y.dtype) * (dy * y) * (y * y))}

EXECUTORS = {
    **{t: elementwise(fn) for t, fn in {**_BINARY, **_UNARY, **_GRADIENTS}.items()},
    **{t: widened(fn) for t, fn in _WIDENED.items()},
    # gradients * (features > 0), as TF's ReluGrad functor: a NaN or inf gradient times 0 is NaN.
    "ReluGrad": elementwise(lambda dy, x: times_mask(dy, x > 0)),
    # Integer division by zero and negative integer powers are refused, as TF's kernels refuse them.
    "RealDiv": _checked(_div, lambda node, x, y: _check_int_divisor(node, y)),
    "FloorDiv": _checked(_floor_div, lambda node, x, y: _check_int_divisor(node, y)),
    "FloorMod": _checked(_floor_mod, lambda node, x, y: _check_int_divisor(node, y)),
    "Pow": _checked(np.power, _check_pow),
    "Exp": _exp,
    "Erf": _erf_executor(complement=False),
    "Erfc": _erf_executor(complement=True),
    "Log": _log,
    "Select": elementwise(np.where),
    "SelectV2": elementwise(np.where),
    "AddN": _add_n,
    "L2Loss": _l2_loss,
    **reduce.EXECUTORS,
}
