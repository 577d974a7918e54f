"""The activation family's executors (prototypes: graph_ir/opset/activation.py), each in the operation order of
TensorFlow's CPU functor (tensorflow/core/kernels/relu_op_functor.h, softplus_op.h, softsign_op.h,
cwise_ops_gradients.h, softmax_op_functor.h, xent_op.h) at the input's own dtype: for float16 and bfloat16 Eigen
rounds each step to the 16-bit type, and so does NumPy (ml_dtypes for bfloat16). Selections, min/max, + - * / are
correctly rounded in both, so those ops are bitwise TF's; exp, log1p and expm1 are Eigen's approximations in TF, and
its 1 / x a reciprocal estimate refined by a Newton step in SIMD packets: not bitwise in float32 (the tests state the
tolerance; in the 16-bit floats the rounding to 16 bits usually hides the difference). Sums (log-softmax, the
cross-entropy) accumulate in float32."""

from __future__ import annotations

import numpy as np

from graph_ir.executors.common import Executor, at_dtype, elementwise, scalar_tail, times_mask, wide
from graph_ir.ir.nodes import Node

# Selu's constants as TF's functor writes them, rounded to the input's dtype there.
SELU_SCALE = 1.0507009873554804934193349852946
SELU_SCALE_ALPHA = 1.7580993408473768599402175208123


# The integer type of each float type's size, for bitwise selections.
_INT_OF_FLOAT = {np.dtype(np.float32): np.dtype(np.int32), np.dtype(np.float64): np.dtype(np.int64)}


def _c(value: float, like: np.ndarray) -> np.ndarray:
    """A constant in `like`'s dtype (static_cast<T> in the functors)."""
    return np.asarray(value, like.dtype)


def _relu6(x: np.ndarray) -> np.ndarray:
    """min(max(x, 0), 6) as TF's Eigen functor (relu_op_functor.h) computes it: NaN stays NaN. Which zero -0.0 gives
    depends on the path (measured): float32 and float64 elements in whole AVX packets go through vmaxps/vmaxpd,
    which return the second operand (+0.0) for two zeros; the last size % packet elements go through std::max, which
    keeps -0.0 (it is not below 0), as does every element of the other dtypes.
    For float32 and float64, without np.where (which branches per element, slow on mixed signs): the elements at or
    below zero get their bits cleared (+0.0) through an integer view, then np.minimum (NaN-propagating) caps at 6."""
    if x.dtype not in _INT_OF_FLOAT or x.ndim == 0:
        y = np.where(x < 0, _c(0, x), x)
        return np.where(y > 6, _c(6, x), y)
    bits = _INT_OF_FLOAT[x.dtype]
    keep = (x <= 0).astype(bits, order="C")  # C order: the tail below is the last elements of a flat view
    np.subtract(keep, 1, out=keep)  # 0 where x <= 0, all bits set elsewhere
    y = np.bitwise_and(x.view(bits), keep, out=keep).view(x.dtype)
    y = np.minimum(y, _c(6, x), out=y)
    tail = scalar_tail(x)
    if tail:  # the scalar tail keeps -0.0
        flat, x_tail = y.reshape(-1), x.reshape(-1)[-tail:]
        flat[-tail:] = np.where(x_tail == 0, x_tail, flat[-tail:])
    return y


def _relu6_grad(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dy * ((x > 0) * (x < 6)): a product, so a NaN or inf gradient stays NaN where the mask is 0."""
    mask = x > 0
    return times_mask(dy, np.logical_and(mask, x < 6, out=mask) if isinstance(mask, np.ndarray) else mask & (x < 6))


def _leaky_relu(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """LeakyRelu: (x > 0).select(x, x * alpha); LeakyReluGrad: (x > 0).select(dy, dy * alpha)."""
    alpha = node.attrs["negative_slope"]
    value, x = (args[0], args[0]) if node.type == "LeakyRelu" else args
    with np.errstate(all="ignore"):
        return [at_dtype(node, 0, np.where(x > 0, value, value * _c(alpha, value)))]


def _elu(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """x < 0 ? exp(x) - 1 : x, with GE's scale * (...) and alpha, input_scale (TF's Elu: all 1)."""
    x, a = args[0], node.attrs
    with np.errstate(all="ignore"):
        scaled = x if a["input_scale"] == 1.0 else x * _c(a["input_scale"], x)
        negative = np.exp(scaled) - _c(1, x)
        if a["alpha"] != 1.0:
            negative = negative * _c(a["alpha"], x)
        y = np.where(x < 0, negative, x)
        if a["scale"] != 1.0:
            y = y * _c(a["scale"], x)
    return [at_dtype(node, 0, y)]


# Eigen's NumTraits<T>::epsilon() where it is not the machine epsilon: float16's is 2^-13 (raw 0x0800).
_EIGEN_EPSILON = {np.dtype(np.float16): 2.0 ** -13}


def _softplus(x: np.ndarray) -> np.ndarray:
    """x above -threshold, exp(x) below threshold, else log1p(exp(x)); threshold = log(epsilon) + 2 in the dtype,
    with Eigen's epsilon of the dtype."""
    epsilon = _EIGEN_EPSILON.get(x.dtype, np.finfo(x.dtype).eps)
    threshold = np.log(_c(epsilon, x)) + _c(2, x)
    e = np.exp(x)
    return np.where(x > -threshold, x, np.where(x < threshold, e, np.log1p(e)))


def _reciprocal_grad(y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """-(y * y) * dy, 0 where dy is 0 (TF's mul_no_nan: a zero gradient stays 0 when y is inf or NaN)."""
    return np.where(dy == 0, _c(0, dy), -(y * y) * dy)


def _row_sum(x: np.ndarray, axes) -> np.ndarray:
    """A sum over `axes` kept as size 1, accumulated in float32 for 16-bit floats, rounded once to x's dtype."""
    return np.sum(wide(x), axis=axes, keepdims=True).astype(x.dtype)


def _log_softmax(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """TF's log-softmax functor: shifted = x - max; shifted - log(sum(exp(shifted))) over `axes`, each step at x's
    dtype as Eigen rounds it for 16-bit floats (measured against TF's float16 and bfloat16: within an ulp)."""
    x = args[0]
    axes = tuple(a % x.ndim for a in node.attrs["axes"])
    if x.size == 0:  # TF returns the empty result (a max over an empty axis has no identity)
        return [at_dtype(node, 0, x.copy())]
    with np.errstate(all="ignore"):
        shifted = x - np.max(x, axis=axes, keepdims=True)
        y = shifted - np.log(_row_sum(np.exp(shifted), axes))
    return [at_dtype(node, 0, y)]


def _softmax_xent(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """TF's xent functor: shifted = x - max; loss = sum(labels * (log(sum(exp(shifted))) - shifted));
    backprop = exp(shifted) / sum(exp(shifted)) - labels (per row), each step at the features' dtype. The two
    broadcast to one shape (TF's BCast); with no classes the loss is 0, as TF's sum over none."""
    features, labels = np.broadcast_arrays(*args)
    if features.shape[1] == 0:
        return [at_dtype(node, 0, np.zeros(features.shape[:1], features.dtype)),
                at_dtype(node, 1, np.zeros(features.shape, features.dtype))]
    with np.errstate(all="ignore"):
        shifted = features - np.max(features, axis=1, keepdims=True)
        e = np.exp(shifted)
        total = _row_sum(e, 1)
        loss = _row_sum(labels * (np.log(total) - shifted), 1)[:, 0]
        backprop = e / total - labels
    return [at_dtype(node, 0, loss), at_dtype(node, 1, backprop)]


_ELEMENTWISE = {
    "Relu6": _relu6,
    "Relu6Grad": _relu6_grad,
    # (x < 0).select(dy * (y + scale_alpha), dy * scale) and (y < 0).select((y + 1) * dy, dy) from the outputs y
    "Selu": lambda x: np.where(x < 0, _c(SELU_SCALE_ALPHA, x) * (np.exp(x) - _c(1, x)), _c(SELU_SCALE, x) * x),
    "SeluGrad": lambda dy, y: np.where(y < 0, dy * (y + _c(SELU_SCALE_ALPHA, y)), dy * _c(SELU_SCALE, y)),
    "EluGrad": lambda dy, y: np.where(y < 0, (y + _c(1, y)) * dy, dy),
    "Softplus": _softplus,
    "SoftplusGrad": lambda dy, x: dy / (np.exp(-x) + _c(1, x)),
    "Softsign": lambda x: x / (np.abs(x) + _c(1, x)),
    "SoftsignGrad": lambda dy, x: dy / np.square(np.abs(x) + _c(1, x)),
    "Log1p": np.log1p,
    "Expm1": np.expm1,
    "Reciprocal": lambda x: _c(1, x) / x,
    "ReciprocalGrad": _reciprocal_grad,
}

EXECUTORS: dict[str, Executor] = {
    **{t: elementwise(fn) for t, fn in _ELEMENTWISE.items()},
    "LeakyRelu": _leaky_relu,
    "LeakyReluGrad": _leaky_relu,
    "Elu": _elu,
    "LogSoftmaxV2": _log_softmax,
    "SoftmaxCrossEntropyWithLogits": _softmax_xent,
}
