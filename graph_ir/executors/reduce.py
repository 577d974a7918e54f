"""The math family's reductions (ReduceSum, ReduceMean, ReduceProd, ReduceMax; prototypes: graph_ir/opset/math.py)
and the accurate sum every float32 executor that sums uses (nn.py, norm.py, pool.py).

Float sums accumulate in float64 and are rounded once to the output dtype: NumPy sums a non-contiguous axis (N, H
and W of NHWC data) one element after another, whose float32 error grows with the count (2.3e-5 relative over
32*112*112 values), while TF's Eigen kernels sum in a tree (tensorflow/core/kernels/reduction_ops_common.h). With a
float64 accumulator the float32 result is within an ulp or so of the exact sum, at least as close to it as TF's, and
np.add.reduce(dtype=float64) casts in its own small buffers, as fast as NumPy's float32 sum over those axes. float16
and bfloat16 are widened first (TF's CPU kernels compute them in float32). float64 and integer sums stay at their
dtype (int64 wraps, as TF's does)."""

from __future__ import annotations

import math

import numpy as np

from graph_ir.executors.common import at_dtype, wide
from graph_ir.nodes import Node


def trunc_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C's integer quotient (rounded toward zero), what TF's integer Div computes; exact for int64 too."""
    return (x - np.fmod(x, y)) // y


def accumulator(x: np.ndarray) -> np.dtype | None:
    """The dtype a sum of x accumulates in: float64 for float32 (and the widened 16-bit floats), else x's own."""
    return np.dtype(np.float64) if x.dtype.kind in "fV" and x.dtype.itemsize <= 4 else None


def accurate_sum(x: np.ndarray, axis, keepdims: bool = False) -> np.ndarray:
    """sum(x) over `axis`, accumulated in float64 for float32 x (see the module docstring); the float64 sums are
    returned unrounded, for callers that go on computing with them."""
    return np.add.reduce(wide(x), axis=axis, dtype=accumulator(wide(x)), keepdims=keepdims)


def _sum(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    return accurate_sum(x, axis, keepdims)


def _mean(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """The float64-accumulated sum over the count, rounded once, for floats; for integers the exact sum (int64's
    wraps, as TF's does) divided toward zero, as TF's integer Mean gives it (a float mean would round large int64
    values)."""
    count = math.prod(x.shape[a] for a in axis)
    if x.dtype.kind not in "iu":
        return accurate_sum(x, axis, keepdims) / count
    total = np.sum(x, axis=axis, keepdims=keepdims, dtype=np.int64)
    return trunc_div(total, np.int64(count))


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


EXECUTORS = {
    "ReduceSum": _reduce(_sum),
    "ReduceMean": _reduce(_mean),
    "ReduceProd": _reduce(np.prod),
    "ReduceMax": _reduce(np.max),
}
