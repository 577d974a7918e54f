"""The convolutions' executors (prototypes: graph_ir/opset/conv.py), NHWC and HWIO; pooling is in pool.py.

y[n, o, p, :] = sum over taps (i, j) whose input position (o*sh + i*dh - top, p*sw + j*dw - left) lies inside x of
x[n, that position, :] @ filter[i, j]. Padding contributes nothing, as in TF's kernels with SAME padding: a NaN or
inf filter tap (or out_backprop value) never meets a padded zero. TF's EXPLICIT-padding filter gradient pads x with
zeros instead, so there 0 * NaN shows: pads that only EXPLICIT gives (neither zero nor SAME's) make the filter
gradient NaN where TF's does (filter_grad.padding_nan). Two ways to compute it, both float32
(float64 for float64 gradients) matrix products, BLAS's summation order, not Eigen's (within the stated tolerance):
- im2col (graph_ir/executors/im2col.py): the windows of the zero-padded x as rows of one matrix, a chunk at a
  time; the fast path, taken when the padded x stays small and the values multiplying the padding are finite (the
  filter; for the filter gradient, a non-finite result is summed again per tap). At stride 1 the input gradient is
  the convolution of dy by the flipped filter, the same way.
- per tap: one product per tap (i, j) that reads the input, over the outputs it reads for; no padding is ever
  made, so time and memory follow the data even for huge pads or windows.
WORKSPACE states each executor's working memory (beyond its inputs and outputs) for the session's planner."""

from __future__ import annotations

import functools
import math

import numpy as np

from graph_ir.executors import direct_conv, filter_grad, gemm, im2col, threads
from graph_ir.executors.common import all_finite, at_dtype, wide
from graph_ir.executors.grouped_conv import or_grouped, or_grouped_workspace
from graph_ir.executors.windows import UFUNC_BUFFERS, AxisTap, axis_taps
from graph_ir.ir.nodes import Node

_F32 = 4  # bytes per element of what the executors compute in: float32 (float64 for float64 gradients)


def _geometry(node: Node, x_shape, k_hw, out_hw) -> tuple[list[AxisTap], list[AxisTap]]:
    """The taps of the filter along H and W that read x, for the output [.., Ho, Wo, ..]."""
    a = node.attrs
    (sh, sw), (dh, dw), (top, _, left, _) = a["strides"][1:3], a["dilations"][1:3], a["pads"]
    return (axis_taps(x_shape[1], out_hw[0], k_hw[0], sh, dh, top),
            axis_taps(x_shape[2], out_hw[1], k_hw[1], sw, dw, left))


def _product(a: np.ndarray, m: np.ndarray) -> np.ndarray:
    """a [N, h, w, K] @ m [K, M] as one matrix product (NumPy's 4-D @ 2-D would loop over N and h)."""
    positions = math.prod(a.shape[:3])
    return gemm.matmul(a.reshape(positions, a.shape[3]), m).reshape(*a.shape[:3], m.shape[1])


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
            y = threads.matmul(_rows(x), f.reshape(f.shape[2:])).astype(dtype, copy=False).reshape(out)
        elif dtype == np.float32 and direct_conv.fits(node.attrs, x.shape, f.shape, out):
            y = direct_conv.convolve(node.attrs, x, f, out)
        elif im2col.fits(node.attrs, x.shape, f.shape, out[1:3], x.itemsize) and all_finite(f):
            y = im2col.convolve(node.attrs, x, f, out, dtype)
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
    """The sums over the taps inside x; with pads only TF's EXPLICIT padding gives, NaN where TF's zero padding
    meets an inf or NaN of dy (graph_ir/executors/filter_grad.py's padding_nan)."""
    (df,), x, dy = _filter_sums(node, args), args[0], args[2]
    with np.errstate(all="ignore"):
        finite = not filter_grad.explicit_pads(node.attrs, x.shape, df.shape) or all_finite(dy)
    if not finite:
        filter_grad.padding_nan(df, dy, *_geometry(node, x.shape, df.shape[:2], dy.shape[1:3]))
    return [df]


def _filter_sums(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, dy = wide(args[0]), wide(args[2])
    f_shape = node.output_descs[0].shape
    if _pointwise(node, f_shape, x.shape, dy.shape):
        with np.errstate(all="ignore"):
            df = threads.matmul(_rows(x).T, _rows(dy))
        return [at_dtype(node, 0, df.reshape(f_shape))]
    if np.result_type(x, dy, np.float32) == np.float32 and direct_conv.filter_fits(node.attrs, x.shape, f_shape,
                                                                                   dy.shape):
        return [at_dtype(node, 0, direct_conv.filter_gradient(node.attrs, x, dy, f_shape))]
    df = np.zeros(f_shape, np.result_type(x, np.float32))
    with np.errstate(all="ignore"):
        if im2col.fits(node.attrs, x.shape, f_shape, dy.shape[1:3], x.itemsize):
            view = im2col.windows(node.attrs, x, f_shape[:2], dy.shape[1:3])
            if filter_grad.lanes_fit(f_shape, dy.shape, view.itemsize):
                filter_grad.in_lanes(df, view, dy)
            else:
                for images, rows, block in im2col.chunks(view):
                    filter_grad.add_products(df, block, dy[images, rows])
            if all_finite(df):  # else a NaN or inf may have met the padding: the sums again, per tap
                return [at_dtype(node, 0, df)]
        taps_h, taps_w = _geometry(node, x.shape, f_shape[:2], dy.shape[1:3])
        df[...] = 0
        for ti in taps_h:
            for tj in taps_w:
                src, dst = _tap_slices(node, ti, tj)
                xs, dys = x[src], dy[dst]
                positions = math.prod(xs.shape[:3])
                df[ti.tap, tj.tap] = gemm.matmul(xs.reshape(positions, xs.shape[3]).T,
                                                 dys.reshape(positions, dys.shape[3]))
    return [at_dtype(node, 0, df)]


def _scatter(node: Node, dx: np.ndarray, cols: np.ndarray, first_row: int, taps_h: list[AxisTap],
             taps_w: list[AxisTap], channels: slice) -> None:
    """dx[.., channels] += each tap's products cols [n, rows from first_row, Wo, kh, kw, C] where the tap reads."""
    for ti in taps_h:
        for tj in taps_w:
            src, _ = _tap_slices(node, ti, tj)
            dx[src + (channels,)] += cols[:, ti.first - first_row:ti.stop - first_row, tj.writes, ti.tap, tj.tap,
                                          channels]


def _transposed_attrs(a: dict, f_shape) -> dict | None:
    """At stride 1 the input gradient is a convolution of dy by the filter flipped in H and W with its channels
    swapped, padded by (window extent - 1 - pad) on each side: these attrs, or None at other strides or where a pad
    exceeds the window's extent."""
    if tuple(a["strides"][1:3]) != (1, 1):
        return None
    (dh, dw), (top, bottom, left, right) = a["dilations"][1:3], a["pads"]
    eh, ew = (f_shape[0] - 1) * dh + 1, (f_shape[1] - 1) * dw + 1
    pads = [eh - 1 - top, eh - 1 - bottom, ew - 1 - left, ew - 1 - right]
    return {**a, "pads": pads} if min(pads) >= 0 else None


def _conv2d_backprop_input(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """dx[n, position read by tap (i, j) for output (o, p)] += dy[n, o, p] @ filter[i, j].T, over the taps that read
    x only: padded positions are never made."""
    f, dy = wide(args[1]), wide(args[2])
    if _pointwise(node, f.shape, node.output_descs[0].shape, dy.shape):
        with np.errstate(all="ignore"):
            dx = threads.matmul(_rows(dy), f.reshape(f.shape[2:]).T)
        return [at_dtype(node, 0, dx.reshape(node.output_descs[0].shape))]
    out, dtype = node.output_descs[0].shape, np.result_type(dy, np.float32)
    transposed = _transposed_attrs(node.attrs, f.shape)
    with np.errstate(all="ignore"):
        if transposed is not None and dtype == np.float32 and direct_conv.fits(transposed, dy.shape, f.shape, out):
            return [at_dtype(node, 0, direct_conv.convolve(transposed, dy, f, out, flipped=True))]
        if transposed is not None and im2col.fits(transposed, dy.shape, f.shape, out[1:3], dy.itemsize) and \
                all_finite(f):
            return [at_dtype(node, 0, im2col.convolve(transposed, dy, f, out, dtype, flipped=True))]
    dx = np.zeros(out, dtype)
    taps_h, taps_w = _geometry(node, dx.shape, f.shape[:2], dy.shape[1:3])
    sh = node.attrs["strides"][1]
    with np.errstate(all="ignore"):
        window = f.shape[0] * f.shape[1] * f.shape[2]
        if window <= im2col.MAX_WINDOW and dy.shape[2] * window * dx.itemsize <= im2col.CHUNK_BYTES:
            # All taps' products for a block of dy (one matrix product, in parts of its rows), then each tap's
            # scatter (in parts of the channels: two parts never add into one element).
            fmat = f.reshape(window, f.shape[3]).T
            for images, rows in im2col.blocks(*dy.shape[:3], window * dx.itemsize):
                block = dy[images, rows]
                cols = threads.matmul(block.reshape(math.prod(block.shape[:3]), f.shape[3]), fmat).reshape(
                    *block.shape[:3], *f.shape[:3])
                clipped = [t for t in (tap.clipped(rows, sh) for tap in taps_h) if t is not None]
                threads.run_parts(
                    functools.partial(_scatter, node, dx[images], cols, rows.start, clipped, taps_w),
                    threads.slices(dx.shape[3], threads.pieces_for(cols.nbytes, threads.MIN_PASS_BYTES, dx.shape[3])))
                del cols  # before the next block's
        elif dy.shape[1] * dy.shape[2] < len(taps_h) * len(taps_w):
            _by_outputs(node.attrs, dx, f, dy)
        else:
            for ti in taps_h:
                for tj in taps_w:
                    src, dst = _tap_slices(node, ti, tj)
                    dx[src] += _product(dy[dst], f[ti.tap, tj.tap].T)
    return [at_dtype(node, 0, dx)]


def _inside(start: int, k: int, d: int, size: int) -> range:
    """The taps i in [0, k) whose position start + i * d lies in [0, size)."""
    return range(max(0, -(start // d) if start < 0 else 0), min(k, (size - 1 - start) // d + 1))


def _by_outputs(a: dict, dx: np.ndarray, f: np.ndarray, dy: np.ndarray) -> None:
    """dx += dy[:, o, p] @ f[taps].T at the positions the taps read, one product per output (o, p) over its taps
    inside x: fewer steps than per tap when the window has more taps than there are outputs (a 4000x4000 filter
    over a 1x1 dy), and no copy larger than f or dx."""
    (sh, sw), (dh, dw), (top, _, left, _) = a["strides"][1:3], a["dilations"][1:3], a["pads"]
    for o in range(dy.shape[1]):
        rows = _inside(o * sh - top, f.shape[0], dh, dx.shape[1])
        for p in range(dy.shape[2]) if len(rows) else ():
            cols = _inside(p * sw - left, f.shape[1], dw, dx.shape[2])
            if not len(cols):
                continue
            taps = f[rows.start:rows.stop, cols.start:cols.stop]
            product = gemm.matmul(taps.reshape(-1, f.shape[3]), dy[:, o, p].T)  # [a * b * C, N]
            r, c = o * sh - top + rows.start * dh, p * sw - left + cols.start * dw
            dx[:, r:r + (len(rows) - 1) * dh + 1:dh, c:c + (len(cols) - 1) * dw + 1:dw] += \
                product.reshape(*taps.shape[:3], dy.shape[0]).transpose(3, 0, 1, 2)


# -- working memory (bytes beyond the node's inputs and outputs), for the session's planner ---------------------------


def _item(*descs) -> int:
    """Bytes per element computed in: 8 for float64, else 4 (16-bit inputs are widened to float32)."""
    return max(max(d.dtype.itemsize for d in descs), _F32)


def _widened(*descs) -> int:
    """float32 copies of 16-bit inputs or outputs (wide, and the float32 result before rounding), and NumPy's
    buffers."""
    return sum(d.num_elements * _F32 for d in descs if d is not None and d.dtype.itemsize == 2) + UFUNC_BUFFERS


def _conv_bytes(attrs: dict, x_shape, f_shape, out_hw, product_elements: int, item: int) -> int:
    """im2col: the padded x and one chunk; per tap: a copy of the strided x slice (<= x) and the products (<= y, or
    a copy of dy's slice). Either may also make `product_elements` of products."""
    n, h, w, c = x_shape
    top, bottom, left, right = attrs["pads"]
    per_tap = (n * h * w * c + product_elements) * item
    if not im2col.fits(attrs, x_shape, f_shape, out_hw, item):
        return per_tap
    padded = n * (h + top + bottom) * (w + left + right) * c * item if any(attrs["pads"]) else 0
    chunk = min(im2col.CHUNK_BYTES, n * out_hw[0] * out_hw[1] * f_shape[0] * f_shape[1] * c * item)
    return max(padded + chunk + product_elements * item, per_tap)


def _conv2d_workspace(node: Node) -> int:
    x, f, y = node.inputs[0].desc, node.inputs[1].desc, node.output_descs[0]
    bias = node.inputs[2].desc if len(node.inputs) > 2 and node.inputs[2] is not None else None
    return _widened(x, f, bias, y) + max(_conv_bytes(node.attrs, x.shape, f.shape, y.shape[1:3], y.num_elements, _F32),
                                         direct_conv.packed_bytes(f.shape))


def _conv2d_backprop_filter_workspace(node: Node) -> int:
    x, dy, df = node.inputs[0].desc, node.inputs[2].desc, node.output_descs[0]
    item = _item(x, dy)
    return _widened(x, dy, df) + max(
        _conv_bytes(node.attrs, x.shape, df.shape, dy.shape[1:3], dy.num_elements, item) + df.num_elements * item +
        (filter_grad.PARTIAL_BYTES if filter_grad.lanes_fit(df.shape, dy.shape, item) else 0),
        direct_conv.filter_bytes(df.shape))


def _conv2d_backprop_input_workspace(node: Node) -> int:
    """At stride 1, the convolution of dy (its padded copy, a chunk, the flipped filter); else one block of all taps'
    products (<= a chunk), or one tap's product (<= dx) and a copy of its dy slice."""
    f, dy, dx = node.inputs[1].desc, node.inputs[2].desc, node.output_descs[0]
    item, window = _item(f, dy), f.shape[0] * f.shape[1] * f.shape[2]
    blocks = min(im2col.CHUNK_BYTES, math.prod(dy.shape[:3]) * window * item) \
        if window <= im2col.MAX_WINDOW and dy.shape[2] * window * item <= im2col.CHUNK_BYTES else 0
    transposed = _transposed_attrs(node.attrs, f.shape)
    as_conv = _conv_bytes(transposed, dy.shape, f.shape, dx.shape[1:3], 0, item) + f.num_elements * item \
        if transposed is not None else 0
    direct = direct_conv.packed_bytes(f.shape) if transposed is not None and \
        direct_conv.fits(transposed, dy.shape, f.shape, dx.shape) else 0
    return _widened(f, dy, dx) + max(blocks, as_conv, (dx.num_elements + max(dy.num_elements, f.num_elements)) * item,
                                     direct)


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
