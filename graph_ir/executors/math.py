"""The math family's executors (prototypes: graph_ir/opset/math.py). Elementwise arithmetic runs at the inputs'
dtype as NumPy does it, which for + - * / and sqrt is IEEE's correctly rounded result, as in TensorFlow. The
activation gradients follow the operation order of TensorFlow's CPU kernels (Eigen's gradient functors), so that
they round alike. Transcendental functions (exp, tanh, sigmoid, erf) and float reductions are not bitwise TF's
(Eigen uses its own polynomial approximations and summation order): the lowering tests state their tolerances."""

from __future__ import annotations

import math

import numpy as np

from graph_ir.errors import GraphError
from graph_ir.executors.common import Executor, at_dtype, elementwise, wide, widened
from graph_ir.nodes import Node


def _is_int(a: np.ndarray) -> bool:
    return a.dtype.kind in "iu"


def _check_int_divisor(node: Node, y: np.ndarray) -> None:
    if _is_int(y) and not np.all(y):
        k = int(np.argmin(y.reshape(-1) != 0))
        raise GraphError(f"{node.type} {node.name!r}: integer division by zero (x2[{k}] is 0 after flattening); TF "
                         "refuses it too")


def _trunc_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C's integer quotient (rounded toward zero), what TF's integer Div computes; exact for int64 too."""
    return (x - np.fmod(x, y)) // y


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
    return _trunc_div(x, y) if _is_int(x) else np.divide(x, y)


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


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


_ERF = np.vectorize(math.erf, otypes=[np.float64])
_ERFC = np.vectorize(math.erfc, otypes=[np.float64])


def _mean(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """np.mean for floats; for integers the exact sum (int64's wraps, as TF's does) divided toward zero, as TF's
    integer Mean gives it (np.mean would go through float64 and round large int64 values)."""
    if not _is_int(x):
        return np.mean(x, axis=axis, keepdims=keepdims)
    total = np.sum(x, axis=axis, keepdims=keepdims, dtype=np.int64)
    return _trunc_div(total, np.int64(math.prod(x.shape[a] for a in axis)))


def _identity(op_type: str, dtype: np.dtype):
    """What TF's reductions give for an empty input: each reducer's identity (reduction_ops_common.h fills the output
    with it): 0, 1, the lowest value (-inf for floats), and NaN for a float mean (0 for an integer one)."""
    if op_type == "ReduceMax":
        return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min
    if op_type == "ReduceMean":
        return np.nan if dtype.kind == "f" else 0
    return 1 if op_type == "ReduceProd" else 0


def _reduce(fn):
    def run(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        x, axes = args[0], args[1].reshape(-1)
        rank = x.ndim
        axes = tuple(sorted({int(a) % rank for a in axes})) if rank else ()
        if not axes and node.type == "ReduceMean" and node.attrs.get("noop_with_empty_axes") is False:
            axes = tuple(range(rank))
        x = wide(x)
        if axes and x.size == 0:
            return [at_dtype(node, 0, np.full(node.output_descs[0].shape, _identity(node.type, x.dtype), x.dtype))]
        with np.errstate(all="ignore"):
            y = fn(x, axis=axes, keepdims=node.attrs["keep_dims"]) if axes else x.copy()
        return [at_dtype(node, 0, y)]

    return run


def _add_n(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    total = args[0].copy()
    with np.errstate(all="ignore"):
        for a in args[1:]:  # left to right, as TF's AddN kernel adds
            total += a
    return [total]


_BINARY = {"Add": np.add, "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply,
           "Maximum": np.maximum, "Minimum": np.minimum, "Less": np.less, "LessEqual": np.less_equal, "Greater": np.greater,
           "GreaterEqual": np.greater_equal, "Equal": np.equal, "NotEqual": np.not_equal, "DivNoNan": _div_no_nan,
           "SquaredDifference": lambda x, y: np.square(x - y)}
_UNARY = {"Cos": np.cos, "Sin": np.sin, "Sqrt": np.sqrt, "Rsqrt": lambda x: 1 / np.sqrt(x), "Square": np.square,
          "Neg": np.negative, "Abs": np.abs, "Sign": np.sign, "Floor": np.floor,
          # max(x, 0) as TF's Relu: NaN stays NaN (-0.0 gives +0.0, as in Eigen's SIMD packets).
          "Relu": lambda x: np.where(~(x <= 0), x, np.zeros((), x.dtype))}
# In float32 (float64 for erf) and rounded once: how TF evaluates them for 16-bit floats.
_WIDENED = {"Sigmoid": _sigmoid, "Tanh": np.tanh,
            "Erf": lambda x: _ERF(x.astype(np.float64)), "Erfc": lambda x: _ERFC(x.astype(np.float64)),
            # Eigen's gradient functors, in their operation order.
            "SigmoidGrad": lambda y, dy: dy * (y * (1 - y)),
            "TanhGrad": lambda y, dy: dy * (1 - y * y),
            # Eigen's scalar_rsqrt_gradient_op gives 0 where dy is 0 (even where y is inf or NaN).
            "RsqrtGrad": lambda y, dy: np.where(dy == 0, np.zeros((), dy.dtype),
                                                np.asarray(-0.5, y.dtype) * (dy * y) * (y * y))}

EXECUTORS = {
    **{t: elementwise(fn) for t, fn in {**_BINARY, **_UNARY}.items()},
    **{t: widened(fn) for t, fn in _WIDENED.items()},
    # gradients * (features > 0), as TF's ReluGrad functor: a NaN or inf gradient times 0 is NaN.
    "ReluGrad": elementwise(lambda dy, x: dy * (x > 0).astype(dy.dtype)),
    # Integer division by zero and negative integer powers are refused, as TF's kernels refuse them.
    "RealDiv": _checked(_div, lambda node, x, y: _check_int_divisor(node, y)),
    "FloorDiv": _checked(_floor_div, lambda node, x, y: _check_int_divisor(node, y)),
    "FloorMod": _checked(_floor_mod, lambda node, x, y: _check_int_divisor(node, y)),
    "Pow": _checked(np.power, _check_pow),
    "Exp": _exp,
    "Log": _log,
    "Select": elementwise(np.where),
    "SelectV2": elementwise(np.where),
    "AddN": _add_n,
    "ReduceSum": _reduce(np.sum),
    "ReduceMean": _reduce(_mean),
    "ReduceProd": _reduce(np.prod),
    "ReduceMax": _reduce(np.max),
}
