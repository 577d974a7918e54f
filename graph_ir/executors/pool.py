"""The pooling executors (prototypes: graph_ir/opset/conv.py), NHWC, with windows clamped to the input as in TF's
kernels (tensorflow/core/kernels/pooling_ops_common.h, avgpooling_op.cc, maxpooling_op.cc): padding is never made.

A window's max and sum are separable: along W first (each row's window), then along H over those, one NumPy
operation per tap that reads the input (graph_ir/executors/windows.py), so time and memory follow the data even
for a window far larger than the input. Max pooling is exact, with TF's CPU rules (NaN skipped, each window starts
at the lowest finite value); its gradient goes to the first maximal element of each window in row-major order, as
TF's CPU kernel routes it; average pooling divides by the window's count inside the input."""

from __future__ import annotations

import numpy as np

from graph_ir.executors import threads
from graph_ir.executors.common import at_dtype, wide
from graph_ir.executors.reduce import accumulator
from graph_ir.executors.windows import UFUNC_BUFFERS, AxisTap, axis_taps, window_counts
from graph_ir.ir.nodes import Node
from graph_ir.opset.conv import pool_geometry


def _geometry(node: Node, shape) -> tuple[list[AxisTap], list[AxisTap], tuple[int, int], tuple[int, int]]:
    """The window's taps along H and W that read the input, the output (Ho, Wo) and the padding before."""
    a = node.attrs
    (kh, kw), (sh, sw) = a["ksize"][1:3], a["strides"][1:3]
    ho, wo, (top, _, left, _) = pool_geometry(node.op, node.name, a, shape)
    return (axis_taps(shape[1], ho, kh, sh, 1, top), axis_taps(shape[2], wo, kw, sw, 1, left), (ho, wo),
            (top, left))


def _at(axis: int, index) -> tuple:
    return (slice(None),) * axis + (index,)


def _reduce(x: np.ndarray, axis: int, taps: list[AxisTap], stride: int, out: int, ufunc, init,
            dtype=None) -> np.ndarray:
    """acc[.., o, ..] = ufunc over the taps reading x for output o (along `axis`), starting from init, in `dtype`
    (x's by default)."""
    acc = np.full((*x.shape[:axis], out, *x.shape[axis + 1:]), init, dtype or x.dtype)
    for t in taps:
        view = acc[_at(axis, t.writes)]
        ufunc(view, x[_at(axis, t.reads(stride))], out=view)
    return acc


def _pooled(node: Node, x: np.ndarray, ufunc, init, dtype=None) -> np.ndarray:
    taps_h, taps_w, (ho, wo), _ = _geometry(node, x.shape)
    sh, sw = node.attrs["strides"][1:3]
    return _reduce(_reduce(x, 2, taps_w, sw, wo, ufunc, init, dtype), 1, taps_h, sh, ho, ufunc, init, dtype)


def _tiles(node: Node, x: np.ndarray) -> np.ndarray | None:
    """x's windows as a view [N, Ho, kh, Wo, kw, C] when they tile it (stride = window, no padding: VGG's 2x2
    pools), else None."""
    a = node.attrs
    (kh, kw), (sh, sw) = a["ksize"][1:3], a["strides"][1:3]
    ho, wo, pads = pool_geometry(node.op, node.name, a, x.shape)
    if (kh, kw) != (sh, sw) or any(pads):
        return None
    return x[:, :ho * kh, :wo * kw].reshape(x.shape[0], ho, kh, wo, kw, x.shape[3])


def _by_images(x: np.ndarray, out: np.ndarray, fn) -> np.ndarray:
    """fn(images) for runs of x's images, one per thread (each writes only its images of `out`); returns out."""
    threads.run_parts(fn, threads.slices(x.shape[0], threads.pieces_for(x.nbytes, threads.MIN_PASS_BYTES,
                                                                         x.shape[0])))
    return out


def _max_pool(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    # TF's CPU kernel starts each window at the dtype's lowest finite value and keeps `max` of it and each element
    # inside the input: NaN never wins (fmax), -inf gives the lowest finite value.
    lowest = np.finfo(args[0].dtype).min
    x = wide(args[0])
    out = np.empty(node.output_descs[0].shape, x.dtype)

    def part(images: slice) -> None:
        tiles = _tiles(node, x[images])
        pooled = _pooled(node, x[images], np.fmax, -np.inf) if tiles is None else \
            np.fmax.reduce(tiles, axis=(2, 4), initial=-np.inf)
        np.maximum(pooled, lowest, out=out[images])

    with np.errstate(all="ignore"):
        return [at_dtype(node, 0, _by_images(x, out, part))]


def _counts(node: Node, shape) -> np.ndarray:
    """How many elements of each window lie inside the input: [1, Ho, Wo, 1]."""
    a = node.attrs
    (kh, kw), (sh, sw) = a["ksize"][1:3], a["strides"][1:3]
    ho, wo, (top, _, left, _) = pool_geometry(node.op, node.name, a, shape)
    rows, cols = window_counts(shape[1], ho, kh, sh, top), window_counts(shape[2], wo, kw, sw, left)
    return (rows[:, None] * cols[None, :])[None, :, :, None]


def _avg_pool(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """The window sums accumulate in float64 for float32 x (reduce.accumulator; 8 bytes per element, as the
    workspace counts), so the mean is rounded once, at least as close to the exact one as TF's."""
    x = wide(args[0])
    work = accumulator(x) or x.dtype
    out = np.empty(node.output_descs[0].shape, work)
    counts = _counts(node, x.shape).astype(work)

    def part(images: slice) -> None:
        np.divide(_pooled(node, x[images], np.add, 0, work), counts, out=out[images])

    with np.errstate(all="ignore"):
        return [at_dtype(node, 0, _by_images(x, out, part))]


def _avg_pool_grad(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """Each window's gradient shared evenly among its elements inside the input, scattered along H, then W (adds
    only: a NaN or Inf gradient reaches only its own window's elements, as in TF)."""
    shape, grad = node.output_descs[0].shape, wide(args[1])
    taps_h, taps_w, _, _ = _geometry(node, shape)
    sh, sw = node.attrs["strides"][1:3]
    counts = _counts(node, shape).astype(grad.dtype)
    out = np.zeros(shape, grad.dtype)

    def part(images: slice) -> None:
        share = grad[images] / counts
        rows = np.zeros((share.shape[0], shape[1], share.shape[2], shape[3]), share.dtype)
        for t in taps_h:
            rows[:, t.reads(sh)] += share[:, t.writes]
        for t in taps_w:
            out[images, :, t.reads(sw)] += rows[:, :, t.writes]

    with np.errstate(all="ignore"):
        return [at_dtype(node, 0, _by_images(out, out, part))]


def _first_max(x: np.ndarray, axis: int, taps: list[AxisTap], stride: int, out: int, index: np.ndarray | None):
    """Along `axis`: each window's greatest value, walking its taps in order and taking only a strictly greater
    one (so the first of the maxima; NaN never wins), with where it came from (its index along `axis`, and
    `index`'s value there when given)."""
    shape = (*x.shape[:axis], out, *x.shape[axis + 1:])
    best, at = np.full(shape, -np.inf, x.dtype), np.full(shape, -1, np.int64)
    carried = None if index is None else np.full(shape, -1, np.int64)
    for t in taps:
        src, dst = _at(axis, t.reads(stride)), _at(axis, t.writes)
        greater = x[src] > best[dst]
        np.copyto(best[dst], x[src], where=greater)
        positions = np.arange(t.start, t.start + t.count * stride, stride).reshape((-1,) + (1,) * (3 - axis))
        np.copyto(at[dst], positions, where=greater)
        if carried is not None:
            np.copyto(carried[dst], index[src], where=greater)
    return best, at, carried


def _max_pool_grad(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """Each window's gradient goes to the element TF's CPU kernel picks: starting from the dtype's lowest finite
    value at the window's first (top-left) position, it walks the window in row-major order and takes each element
    greater than the best so far. So the first of the maxima wins, NaN never wins, and a window with nothing above
    the lowest value routes to its first position (dropped if that is padding)."""
    x, grad = wide(args[0]), wide(args[2])
    lowest = float(np.finfo(args[0].dtype).min)
    out = np.zeros(x.shape, np.result_type(x, grad))
    with np.errstate(all="ignore"):
        return [at_dtype(node, 0, _by_images(x, out, lambda images: _route_max_grad(
            node, x[images], grad[images], lowest, out[images])))]


def _route_max_grad(node: Node, x: np.ndarray, grad: np.ndarray, lowest: float, out: np.ndarray) -> None:
    """MaxPoolGrad of some images, added into their `out` (zeros)."""
    tiles = _tiles(node, x)
    if tiles is not None:  # each element in one window: the first maximum of each, as TF walks it, by argmax
        n, ho, kh, wo, kw, c = tiles.shape
        clamped = np.fmax(tiles, lowest)  # NaN and -inf never beat the start (the lowest value at the first tap)
        first = clamped.transpose(0, 1, 3, 2, 4, 5).reshape(n, ho, wo, kh * kw, c).argmax(axis=3)
        taps = np.arange(kh * kw).reshape(1, 1, kh, 1, kw, 1)
        chosen = first[:, :, None, :, None, :] == taps
        out[:, :ho * kh, :wo * kw] = np.where(chosen, grad[:, :, None, :, None, :], 0).reshape(n, ho * kh, wo * kw, c)
        return
    taps_h, taps_w, (ho, wo), (top, left) = _geometry(node, x.shape)
    sh, sw = node.attrs["strides"][1:3]
    if len(taps_h) * len(taps_w) <= MAX_TAP_PAIRS:
        _route_by_taps(node, x, grad, lowest, out, taps_h, taps_w)
        return
    row_best, row_col, _ = _first_max(x, 2, taps_w, sw, wo, None)
    best, row, col = _first_max(row_best, 1, taps_h, sh, ho, row_col)
    # Windows with nothing above the lowest value: their first position.
    none = ~(best > lowest)
    row = np.where(none, (np.arange(ho, dtype=np.int64) * sh - top)[None, :, None, None], row)
    col = np.where(none, (np.arange(wo, dtype=np.int64) * sw - left)[None, None, :, None], col)
    n, h, w, c = x.shape
    inside = (row >= 0) & (row < h) & (col >= 0) & (col < w)
    image = np.arange(n, dtype=np.int64)[:, None, None, None]
    channel = np.arange(c, dtype=np.int64)[None, None, None, :]
    flat = ((image * h + row) * w + col) * c + channel
    np.add.at(out.reshape(-1), flat[inside], grad[inside])


MAX_TAP_PAIRS = 64  # windows with more taps inside the input go the separable way (passes in kh + kw, not kh * kw)


def _route_by_taps(node: Node, x: np.ndarray, grad: np.ndarray, lowest: float, out: np.ndarray,
                   taps_h: list[AxisTap], taps_w: list[AxisTap]) -> None:
    """MaxPoolGrad one tap (i, j) at a time: each window's first maximum found walking its taps in row-major order
    (tap i * kw + j; -1 while nothing beat the lowest value: then the first position, tap 0, which drops out if it
    is padding), then each tap's share added in descending (i, j) order: where windows overlap, an element gets its
    windows' gradients window by window in row-major order (a later window reads it through an earlier tap), as the
    separable way adds them."""
    (sh, sw), kw = node.attrs["strides"][1:3], node.attrs["ksize"][2]
    best = np.full(grad.shape, lowest, x.dtype)
    first = np.full(grad.shape, -1, np.int64)  # i * kw + j: beyond int32 for huge windows
    for ti in taps_h:
        for tj in taps_w:
            src, dst = (slice(None), ti.reads(sh), tj.reads(sw)), (slice(None), ti.writes, tj.writes)
            greater = x[src] > best[dst]
            np.copyto(best[dst], x[src], where=greater)
            np.copyto(first[dst], ti.tap * kw + tj.tap, where=greater)
    first[first < 0] = 0
    for ti in reversed(taps_h):
        for tj in reversed(taps_w):
            src, dst = (slice(None), ti.reads(sh), tj.reads(sw)), (slice(None), ti.writes, tj.writes)
            out[src] += np.where(first[dst] == ti.tap * kw + tj.tap, grad[dst], np.zeros((), grad.dtype))


# -- working memory (bytes beyond the node's inputs and outputs), for the session's planner ---------------------------


def _mid(node: Node, shape) -> tuple[int, int]:
    """Elements of the half-pooled array [N, H, Wo, C] and of the output [N, Ho, Wo, C]."""
    ho, wo, _ = pool_geometry(node.op, node.name, node.attrs, shape)
    return shape[0] * shape[1] * wo * shape[3], shape[0] * ho * wo * shape[3]


def _widened(desc) -> int:
    """A float32 copy of a 16-bit input, and NumPy's buffers."""
    return (desc.num_elements * 4 if desc.dtype.itemsize == 2 else 0) + UFUNC_BUFFERS // 2


def _pool_workspace(node: Node) -> int:
    """x widened (16-bit x), the half-pooled array, the result before rounding and its division's counts."""
    x = node.inputs[0].desc
    mid, out = _mid(node, x.shape)
    return _widened(x) + 8 * (mid + 2 * out)


def _avg_pool_grad_workspace(node: Node) -> int:
    """The shares, their counts and quotient, the half-scattered array (in grad's float32 or float64), a float32 copy of a
    16-bit grad, and the float32 result before rounding to a 16-bit output (else the result is the output itself:
    a 5000x5000 VALID window's gradient holds its output and one column)."""
    shape, grad, y = node.output_descs[0].shape, node.inputs[1].desc, node.output_descs[0]
    mid, out = _mid(node, shape)
    item = 8 if grad.dtype.itemsize == 8 else 4
    rounded = 4 * y.num_elements if y.dtype.itemsize == 2 else 0
    return item * (3 * out + mid) + 8 * out + _widened(grad) + rounded + UFUNC_BUFFERS


def _max_pool_grad_workspace(node: Node) -> int:
    """x and grad widened; per half-pooled element: best, column, a mask; per output: best, row, column, masks and
    flat indices, and their selection; the result before rounding."""
    x = node.inputs[0].desc
    mid, out = _mid(node, x.shape)
    return _widened(x) + 2 * _widened(node.inputs[2].desc) + 8 * x.num_elements + 17 * mid + 64 * out


EXECUTORS = {
    "MaxPool": _max_pool,
    "AvgPool": _avg_pool,
    "MaxPoolGrad": _max_pool_grad,
    "AvgPoolGrad": _avg_pool_grad,
}
WORKSPACE = {
    "MaxPool": _pool_workspace,
    "AvgPool": _pool_workspace,
    "MaxPoolGrad": _max_pool_grad_workspace,
    "AvgPoolGrad": _avg_pool_grad_workspace,
}
