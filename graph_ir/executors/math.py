"""The math family's executors (prototypes: graph_ir/opset/math.py). Elementwise arithmetic runs at the inputs'
dtype as NumPy does it, which for + - * / and sqrt is IEEE's correctly rounded result, as in TensorFlow. The
activation gradients follow the operation order of TensorFlow's CPU kernels (Eigen's gradient functors), so that
they round alike. Transcendental functions (exp, tanh, sigmoid, erf) and float reductions are not bitwise TF's
(Eigen uses its own polynomial approximations and summation order): the lowering tests state their tolerances."""

from __future__ import annotations

import math

import numpy as np

from graph_ir.executors.common import at_dtype, elementwise, wide, widened
from graph_ir.nodes import Node


def _floor_mod(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.mod(x, y)  # the sign of the divisor, as TF's FloorMod (NumPy's mod for floats and ints)


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
    return np.where(y == 0, np.zeros((), x.dtype), x / np.where(y == 0, np.ones((), y.dtype), y))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


_ERF = np.vectorize(math.erf, otypes=[np.float64])
_ERFC = np.vectorize(math.erfc, otypes=[np.float64])


def _reduce(fn):
    def run(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        x, axes = args[0], args[1].reshape(-1)
        rank = x.ndim
        axes = tuple(sorted({int(a) % rank for a in axes})) if rank else ()
        if not axes and node.type == "ReduceMean" and node.attrs.get("noop_with_empty_axes") is False:
            axes = tuple(range(rank))
        x = wide(x)
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


_BINARY = {"Add": np.add, "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply, "RealDiv": np.divide,
           "Maximum": np.maximum, "Minimum": np.minimum, "Pow": np.power, "FloorMod": _floor_mod,
           "FloorDiv": np.floor_divide, "Less": np.less, "LessEqual": np.less_equal, "Greater": np.greater,
           "GreaterEqual": np.greater_equal, "Equal": np.equal, "NotEqual": np.not_equal, "DivNoNan": _div_no_nan,
           "SquaredDifference": lambda x, y: np.square(x - y)}
_UNARY = {"Cos": np.cos, "Sin": np.sin, "Sqrt": np.sqrt, "Rsqrt": lambda x: 1 / np.sqrt(x), "Square": np.square,
          "Neg": np.negative, "Abs": np.abs, "Sign": np.sign, "Floor": np.floor,
          "Relu": lambda x: np.where(x > 0, x, np.zeros((), x.dtype))}
# In float32 (float64 for erf) and rounded once: how TF evaluates them for 16-bit floats.
_WIDENED = {"Sigmoid": _sigmoid, "Tanh": np.tanh,
            "Erf": lambda x: _ERF(x.astype(np.float64)), "Erfc": lambda x: _ERFC(x.astype(np.float64)),
            # Eigen's gradient functors, in their operation order.
            "SigmoidGrad": lambda y, dy: dy * (y * (1 - y)),
            "TanhGrad": lambda y, dy: dy * (1 - y * y),
            "RsqrtGrad": lambda y, dy: np.asarray(-0.5, y.dtype) * (dy * y) * (y * y)}

EXECUTORS = {
    **{t: elementwise(fn) for t, fn in {**_BINARY, **_UNARY}.items()},
    **{t: widened(fn) for t, fn in _WIDENED.items()},
    "ReluGrad": elementwise(lambda dy, x: np.where(x > 0, dy, np.zeros((), dy.dtype))),
    "Exp": _exp,
    "Log": _log,
    "Select": elementwise(np.where),
    "SelectV2": elementwise(np.where),
    "AddN": _add_n,
    "ReduceSum": _reduce(np.sum),
    "ReduceMean": _reduce(np.mean),
    "ReduceProd": _reduce(np.prod),
    "ReduceMax": _reduce(np.max),
}
