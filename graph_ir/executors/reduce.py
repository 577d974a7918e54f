"""The math family's reductions (ReduceSum, ReduceMean, ReduceProd, ReduceMax, ReduceMin; prototypes:
graph_ir/opset/math.py) and the accurate sum every float32 executor that sums uses (nn.py, norm.py, pool.py).

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

from graph_ir import _binding
from graph_ir.executors import threads
from graph_ir.executors.common import at_dtype, wide
from graph_ir.ir.nodes import Node


def trunc_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C's integer quotient (rounded toward zero), what TF's integer Div computes; exact for int64 too."""
    return (x - np.fmod(x, y)) // y


def accumulator(x: np.ndarray) -> np.dtype | None:
    """The dtype a sum of x accumulates in: float64 for float32 (and the widened 16-bit floats), else x's own."""
    return np.dtype(np.float64) if x.dtype.kind in "fV" and x.dtype.itemsize <= 4 else None


def accurate_sum(x: np.ndarray, axis, keepdims: bool = False) -> np.ndarray:
    """sum(x) over `axis`, accumulated in float64 for float32 x (see the module docstring); the float64 sums are
    returned unrounded, for callers that go on computing with them."""
    x = wide(x)
    leading = _leading(x, axis)
    if leading is not None:  # the common case (N, H, W of NHWC data), in one vectorized pass: graph_ir/cc/row_sums.h
        rows = math.prod(x.shape[:leading])
        sums = np.empty(x.shape[leading:], np.float64)
        _binding.column_sums_f64(x.reshape(rows, -1), sums.reshape(-1), threads.count())
        return sums.reshape((1,) * leading + sums.shape) if keepdims else sums
    return np.add.reduce(x, axis=axis, dtype=accumulator(x), keepdims=keepdims)


_MIN_COLUMNS = 8  # fewer columns than a vector: NumPy's own contiguous sum is as fast


def _leading(x: np.ndarray, axis) -> int | None:
    """k when `axis` is x's first k axes (k >= 1, at least one axis kept, at least _MIN_COLUMNS values a row) and x
    a C-contiguous float32 array, else None."""
    if x.dtype != np.float32 or not x.flags.c_contiguous or x.size == 0:
        return None
    axes = sorted({a % x.ndim for a in ((axis,) if isinstance(axis, (int, np.integer)) else axis)}) \
        if axis is not None and x.ndim else None
    if not axes or axes != list(range(len(axes))) or len(axes) == x.ndim:
        return None
    return len(axes) if math.prod(x.shape[len(axes):]) >= _MIN_COLUMNS else None


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
    with it): 0, 1, the lowest value for a max (-inf for floats), the highest for a min (+inf), and NaN for a float
    mean (0 for an integer one)."""
    if op_type == "ReduceMax":
        return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min
    if op_type == "ReduceMin":
        return np.inf if dtype.kind == "f" else np.iinfo(dtype).max
    if op_type == "ReduceMean":
        return np.nan if dtype.kind == "f" else 0
    return 1 if op_type == "ReduceProd" else 0


def _split_over_kept_axis(fn, x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """fn(x, axis=axes, keepdims) in runs of the first axis not reduced (one per thread; each output element is
    reduced by one thread exactly as alone), or at once when every axis is reduced or x is small."""
    kept = [k for k in range(x.ndim) if k not in axes and x.shape[k] > 1]
    if fn in (_sum, _mean) and _leading(x, axes) is not None:  # accurate_sum's own threads do it
        kept = []
    pieces = threads.pieces_for(x.nbytes, threads.MIN_PASS_BYTES, x.shape[kept[0]]) if kept else 1
    if pieces == 1:
        return fn(x, axis=axes, keepdims=keepdims)
    k = kept[0]
    runs = threads.slices(x.shape[k], pieces)
    at_out = k if keepdims else k - sum(a < k for a in axes)
    empty = fn(x[(slice(None),) * k + (slice(0, 0),)], axis=axes, keepdims=keepdims)  # the result's dtype and shape
    y = np.empty(empty.shape[:at_out] + (x.shape[k],) + empty.shape[at_out + 1:], empty.dtype)
    threads.run_parts(lambda run: np.copyto(y[(slice(None),) * at_out + (run,)],
                                            fn(x[(slice(None),) * k + (run,)], axis=axes, keepdims=keepdims)),
                      runs)
    return y


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
            y = _split_over_kept_axis(fn, x, axes, node.attrs["keep_dims"]) if axes else x.copy()
        return [at_dtype(node, 0, y)]

    return run


EXECUTORS = {
    "ReduceSum": _reduce(_sum),
    "ReduceMean": _reduce(_mean),
    "ReduceProd": _reduce(np.prod),
    "ReduceMax": _reduce(np.max),
    "ReduceMin": _reduce(np.min),
}
