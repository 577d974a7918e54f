"""The convolutions' executors (prototypes: graph_ir/opset/conv.py), NHWC and HWIO; pooling is in pool.py.

y[n, o, p, :] = sum over taps (i, j) whose input position (o*sh + i*dh - top, p*sw + j*dw - left) lies inside x of
x[n, that position, :] @ filter[i, j]. Padding contributes nothing, as in TF's kernels with SAME padding: a NaN or
inf filter tap (or out_backprop value) never meets a padded zero. (TF's EXPLICIT-padding filter gradient pads x with
zeros instead, so there 0 * NaN shows; graph_ir follows SAME for all pads.) Two ways to compute it, both float32
(float64 for float64 gradients) matrix products, BLAS's summation order, not Eigen's (within the stated tolerance):
- im2col: the windows of the zero-padded x as rows of one matrix, in chunks of at most CHUNK_BYTES; the fast path,
  taken when the padded x stays small and the values multiplying the padding are finite (the filter; for the
  filter gradient, a non-finite result is summed again per tap).
- per tap: one product per tap (i, j) that reads the input, over the outputs it reads for; no padding is ever
  made, so time and memory follow the data even for huge pads or windows.
WORKSPACE states each executor's working memory (beyond its inputs and outputs) for the session's planner."""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from graph_ir.executors.common import at_dtype, wide
from graph_ir.executors.grouped_conv import or_grouped, or_grouped_workspace
from graph_ir.executors.windows import CHUNK_BYTES, UFUNC_BUFFERS, AxisTap, axis_taps
from graph_ir.nodes import Node

_F32 = 4  # bytes per element of what the executors compute in: float32 (float64 for float64 gradients)


def _geometry(node: Node, x_shape, k_hw, out_hw) -> tuple[list[AxisTap], list[AxisTap]]:
    """The taps of the filter along H and W that read x, for the output [.., Ho, Wo, ..]."""
    a = node.attrs
    (sh, sw), (dh, dw), (top, _, left, _) = a["strides"][1:3], a["dilations"][1:3], a["pads"]
    return (axis_taps(x_shape[1], out_hw[0], k_hw[0], sh, dh, top),
            axis_taps(x_shape[2], out_hw[1], k_hw[1], sw, dw, left))


IM2COL_MAX_WINDOW = 8192  # kh * kw * C: above it, per tap is faster (im2col's chunks no longer fit the caches)


def _im2col_fits(node: Node, x_shape, f_shape, out_hw, item: int) -> bool:
    """Whether im2col is the faster way and its memory stays small: a window of at most IM2COL_MAX_WINDOW values,
    the padded x within twice x plus one chunk, and one output row of windows within a chunk (`item` bytes each)."""
    top, bottom, left, right = node.attrs["pads"]
    n, h, w, c = x_shape
    window = f_shape[0] * f_shape[1] * c
    padded = n * (h + top + bottom) * (w + left + right) * c * item
    return window <= IM2COL_MAX_WINDOW and padded <= 2 * n * h * w * c * item + CHUNK_BYTES and \
        out_hw[1] * window * item <= CHUNK_BYTES


def _windows(node: Node, x: np.ndarray, k_hw, out_hw) -> np.ndarray:
    """[N, Ho, Wo, kh, kw, C] views of the zero-padded x under each output position (im2col's rows)."""
    a = node.attrs
    (sh, sw), (dh, dw), (top, bottom, left, right) = a["strides"][1:3], a["dilations"][1:3], a["pads"]
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0))) if any(a["pads"]) else x
    span = ((k_hw[0] - 1) * dh + 1, (k_hw[1] - 1) * dw + 1)
    view = sliding_window_view(xp, span, axis=(1, 2))[:, ::sh, ::sw, :, ::dh, ::dw][:, :out_hw[0], :out_hw[1]]
    return view.transpose(0, 1, 2, 4, 5, 3)


def _blocks(n: int, ho: int, wo: int, position_bytes: int):
    """(images, rows) blocks of the output positions whose `position_bytes` each fit CHUNK_BYTES: whole images
    when one fits, else runs of output rows (one row at least: callers keep a row within a chunk)."""
    per_row = max(wo * position_bytes, 1)
    if ho * per_row <= CHUNK_BYTES:
        step = max(CHUNK_BYTES // (ho * per_row), 1)
        for n0 in range(0, n, step):
            yield slice(n0, n0 + step), slice(0, ho)
    else:
        step = max(CHUNK_BYTES // per_row, 1)
        for n0 in range(n):
            for h0 in range(0, ho, step):
                yield slice(n0, n0 + 1), slice(h0, min(h0 + step, ho))


def _chunks(view: np.ndarray):
    """(images, rows, block): im2col's windows [N, Ho, Wo, kh, kw, C] in blocks whose matrix (block.reshape(-1, K),
    a copy the caller makes and drops in one expression) holds at most CHUNK_BYTES."""
    for images, rows in _blocks(*view.shape[:3], math.prod(view.shape[3:]) * view.itemsize):
        yield images, rows, view[images, rows]


def _all_finite(a: np.ndarray) -> bool:
    """Whether a holds no NaN or inf (one pass: a sum is finite only then; one that overflows says no, which only
    takes the slower per-tap way)."""
    return bool(np.isfinite(np.add.reduce(a, axis=None)))


def _product(a: np.ndarray, m: np.ndarray) -> np.ndarray:
    """a [N, h, w, K] @ m [K, M] as one matrix product (NumPy's 4-D @ 2-D would loop over N and h)."""
    positions = math.prod(a.shape[:3])
    return (a.reshape(positions, a.shape[3]) @ m).reshape(*a.shape[:3], m.shape[1])


def _tap_slices(node: Node, ti: AxisTap, tj: AxisTap) -> tuple[tuple, tuple]:
    """(input slice, output slice) of taps ti (along H) and tj (along W)."""
    (sh, sw) = node.attrs["strides"][1:3]
    return (slice(None), ti.reads(sh), tj.reads(sw)), (slice(None), ti.writes, tj.writes)


def _pointwise(node: Node, f_shape, x_shape, out_shape) -> bool:
    """A 1x1 filter at stride 1 without padding (ResNet's bottlenecks, MobileNet's expansions): each output position
    is its own input position's channels times the filter, one matrix product over x's [N*H*W, C] rows as they lie
    in memory (no windows, no padding to meet)."""
    return tuple(f_shape[:2]) == (1, 1) and tuple(node.attrs["strides"][1:3]) == (1, 1) and \
        not any(node.attrs["pads"]) and tuple(x_shape[:3]) == tuple(out_shape[:3])


def _rows(a: np.ndarray) -> np.ndarray:
    return a.reshape(math.prod(a.shape[:3]), a.shape[3])


def _conv2d(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, f = wide(args[0]), wide(args[1])
    out = node.output_descs[0].shape
    dtype = np.result_type(x, np.float32)
    with np.errstate(all="ignore"):
        if _pointwise(node, f.shape, x.shape, out):
            y = (_rows(x) @ f.reshape(f.shape[2:])).astype(dtype, copy=False).reshape(out)
        elif _im2col_fits(node, x.shape, f.shape, out[1:3], x.itemsize) and _all_finite(f):
            y = np.empty(out, dtype)
            fmat = f.reshape(math.prod(f.shape[:3]), f.shape[3])
            for images, rows, block in _chunks(_windows(node, x, f.shape[:2], out[1:3])):
                positions = math.prod(block.shape[:3])
                np.matmul(block.reshape(positions, fmat.shape[0]), fmat, out=y[images, rows].reshape(positions, -1))
        else:
            y = np.zeros(out, dtype)
            taps_h, taps_w = _geometry(node, x.shape, f.shape[:2], out[1:3])
            for ti in taps_h:
                for tj in taps_w:
                    src, dst = _tap_slices(node, ti, tj)
                    y[dst] += _product(x[src], f[ti.tap, tj.tap])
        if len(args) > 2:  # bias [Cout], over the channel axis (CANN's Conv2D)
            y += wide(args[2]).astype(dtype)
    return [at_dtype(node, 0, y)]


def _conv2d_backprop_filter(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, dy = wide(args[0]), wide(args[2])
    f_shape = node.output_descs[0].shape
    if _pointwise(node, f_shape, x.shape, dy.shape):
        with np.errstate(all="ignore"):
            df = _rows(x).T @ _rows(dy)
        return [at_dtype(node, 0, df.reshape(f_shape))]
    df = np.zeros(f_shape, np.result_type(x, np.float32))
    with np.errstate(all="ignore"):
        if _im2col_fits(node, x.shape, f_shape, dy.shape[1:3], x.itemsize):
            flat = df.reshape(math.prod(f_shape[:3]), f_shape[3])
            for images, rows, block in _chunks(_windows(node, x, f_shape[:2], dy.shape[1:3])):
                positions = math.prod(block.shape[:3])
                flat += block.reshape(positions, flat.shape[0]).T @ dy[images, rows].reshape(positions, f_shape[3])
            if _all_finite(df):  # else a NaN or inf may have met the padding: the sums again, per tap
                return [at_dtype(node, 0, df)]
        taps_h, taps_w = _geometry(node, x.shape, f_shape[:2], dy.shape[1:3])
        df[...] = 0
        for ti in taps_h:
            for tj in taps_w:
                src, dst = _tap_slices(node, ti, tj)
                xs, dys = x[src], dy[dst]
                positions = math.prod(xs.shape[:3])
                df[ti.tap, tj.tap] = xs.reshape(positions, xs.shape[3]).T @ dys.reshape(positions, dys.shape[3])
    return [at_dtype(node, 0, df)]


def _conv2d_backprop_input(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """dx[n, position read by tap (i, j) for output (o, p)] += dy[n, o, p] @ filter[i, j].T, over the taps that read
    x only: padded positions are never made."""
    f, dy = wide(args[1]), wide(args[2])
    if _pointwise(node, f.shape, node.output_descs[0].shape, dy.shape):
        with np.errstate(all="ignore"):
            dx = _rows(dy) @ f.reshape(f.shape[2:]).T
        return [at_dtype(node, 0, dx.reshape(node.output_descs[0].shape))]
    dx = np.zeros(node.output_descs[0].shape, np.result_type(dy, np.float32))
    taps_h, taps_w = _geometry(node, dx.shape, f.shape[:2], dy.shape[1:3])
    sh = node.attrs["strides"][1]
    with np.errstate(all="ignore"):
        window = f.shape[0] * f.shape[1] * f.shape[2]
        if window <= IM2COL_MAX_WINDOW and dy.shape[2] * window * dx.itemsize <= CHUNK_BYTES:
            # All taps' products for a block of dy (one matrix product), then each tap's scatter.
            fmat = f.reshape(window, f.shape[3]).T
            for images, rows in _blocks(*dy.shape[:3], window * dx.itemsize):
                part = dy[images, rows]
                cols = (part.reshape(math.prod(part.shape[:3]), f.shape[3]) @ fmat).reshape(*part.shape[:3],
                                                                                           *f.shape[:3])
                for ti in (t for t in (tap.clipped(rows, sh) for tap in taps_h) if t is not None):
                    for tj in taps_w:
                        src, dst = _tap_slices(node, ti, tj)
                        dx[images][src] += cols[:, ti.first - rows.start:ti.stop - rows.start, tj.writes, ti.tap,
                                                tj.tap]
                del cols  # before the next block's
        else:
            for ti in taps_h:
                for tj in taps_w:
                    src, dst = _tap_slices(node, ti, tj)
                    dx[src] += _product(dy[dst], f[ti.tap, tj.tap].T)
    return [at_dtype(node, 0, dx)]


# -- working memory (bytes beyond the node's inputs and outputs), for the session's planner ---------------------------


def _item(*descs) -> int:
    """Bytes per element computed in: 8 for float64, else 4 (16-bit inputs are widened to float32)."""
    return max(max(d.dtype.itemsize for d in descs), _F32)


def _widened(*descs) -> int:
    """float32 copies of 16-bit inputs or outputs (wide, and the float32 result before rounding), and NumPy's
    buffers."""
    return sum(d.num_elements * _F32 for d in descs if d is not None and d.dtype.itemsize == 2) + UFUNC_BUFFERS


def _conv_bytes(node: Node, x_shape, f_shape, out_hw, product_elements: int, item: int) -> int:
    """im2col: the padded x and one chunk; per tap: a copy of the strided x slice (<= x) and the products (<= y, or
    a copy of dy's slice). Either may also make `product_elements` of products."""
    n, h, w, c = x_shape
    top, bottom, left, right = node.attrs["pads"]
    per_tap = (n * h * w * c + product_elements) * item
    if not _im2col_fits(node, x_shape, f_shape, out_hw, item):
        return per_tap
    padded = n * (h + top + bottom) * (w + left + right) * c * item if any(node.attrs["pads"]) else 0
    chunk = min(CHUNK_BYTES, n * out_hw[0] * out_hw[1] * f_shape[0] * f_shape[1] * c * item)
    return max(padded + chunk + product_elements * item, per_tap)


def _conv2d_workspace(node: Node) -> int:
    x, f, y = node.inputs[0].desc, node.inputs[1].desc, node.output_descs[0]
    bias = node.inputs[2].desc if len(node.inputs) > 2 and node.inputs[2] is not None else None
    return _widened(x, f, bias, y) + _conv_bytes(node, x.shape, f.shape, y.shape[1:3], y.num_elements, _F32)


def _conv2d_backprop_filter_workspace(node: Node) -> int:
    x, dy, df = node.inputs[0].desc, node.inputs[2].desc, node.output_descs[0]
    item = _item(x, dy)
    return _widened(x, dy, df) + _conv_bytes(node, x.shape, df.shape, dy.shape[1:3], dy.num_elements, item) + \
        df.num_elements * item


def _conv2d_backprop_input_workspace(node: Node) -> int:
    """One block of all taps' products (<= a chunk), or one tap's product (<= dx) and a copy of its dy slice."""
    f, dy, dx = node.inputs[1].desc, node.inputs[2].desc, node.output_descs[0]
    item, window = _item(f, dy), f.shape[0] * f.shape[1] * f.shape[2]
    blocks = min(CHUNK_BYTES, math.prod(dy.shape[:3]) * window * item) \
        if window <= IM2COL_MAX_WINDOW and dy.shape[2] * window * item <= CHUNK_BYTES else 0
    return _widened(f, dy, dx) + max(blocks, (dx.num_elements + dy.num_elements) * item)


# groups > 1 (a grouped convolution) goes to graph_ir/executors/grouped_conv.py's dispatch
EXECUTORS = {
    "Conv2D": or_grouped(_conv2d),
    "Conv2DBackpropFilter": or_grouped(_conv2d_backprop_filter),
    "Conv2DBackpropInput": or_grouped(_conv2d_backprop_input),
}
WORKSPACE = {
    "Conv2D": or_grouped_workspace(_conv2d_workspace),
    "Conv2DBackpropFilter": or_grouped_workspace(_conv2d_backprop_filter_workspace),
    "Conv2DBackpropInput": or_grouped_workspace(_conv2d_backprop_input_workspace),
}
