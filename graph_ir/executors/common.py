"""What every executor family shares: the executor signature and the conversions to the node's output dtype."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graph_ir.ir.nodes import Node

# An executor gets the node and its input values (in IR order) and returns its output values.
Executor = Callable[[Node, list[np.ndarray]], list[np.ndarray]]


def c_ordered(x: np.ndarray) -> np.ndarray:
    """x in C order, copied only when it is not (np.ascontiguousarray would also make a 0-d array 1-d)."""
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


def at_dtype(node: Node, k: int, value) -> np.ndarray:
    """A result as an array of the node's output dtype (NumPy turns 0-d results into scalars)."""
    return np.asarray(value, dtype=node.output_descs[k].dtype.numpy)


def elementwise(fn) -> Executor:
    """An executor computing fn(*args) at the inputs' dtype, with Inf and NaN flowing as in TensorFlow."""

    def run(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            return [at_dtype(node, 0, fn(*args))]

    return run


def wide(a: np.ndarray) -> np.ndarray:
    """float16 and bfloat16 as float32 (what TF's CPU kernels and the Ascend kernels compute in); others as given."""
    return a.astype(np.float32) if a.dtype.itemsize == 2 and a.dtype.kind in "fV" else a


def widened(fn) -> Executor:
    """An executor computing fn in float32 for float16/bfloat16 inputs (as TF's CPU kernels and the Ascend kernels
    do for the 16-bit floats), then rounding to the output dtype."""

    def run(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            return [at_dtype(node, 0, fn(*[wide(a) for a in args]))]

    return run


def times_mask(dy: np.ndarray, mask) -> np.ndarray:
    """dy * mask.astype(dy.dtype) (TF's gradients * (condition) product: a NaN or inf gradient gives NaN where the mask
    is 0, a negative one -0.0), computed into the mask's converted copy: one new array instead of two."""
    factor = np.asarray(mask).astype(dy.dtype)
    if factor.shape != np.broadcast_shapes(dy.shape, factor.shape):
        return dy * factor
    return np.multiply(dy, factor, out=factor)


def all_finite(a: np.ndarray) -> bool:
    """Whether a holds no NaN or inf (one pass: a sum is finite only then; one that overflows says no, which only
    sends the caller its slower way that any values take: the convolutions' per-tap sums)."""
    return bool(np.isfinite(np.add.reduce(a, axis=None)))


AVX_PACKET_BYTES = 32  # Eigen's AVX packets in TF's x86 wheels: 8 float32 or 4 float64


def scalar_tail(x: np.ndarray) -> int:
    """How many of x's last elements (in C order) Eigen's vectorized loop leaves to its scalar code: TF's results
    differ there for signed zeros and subnormals (measured: Relu6, Sign)."""
    return x.size % (AVX_PACKET_BYTES // x.itemsize)
