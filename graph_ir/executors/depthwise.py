"""The depthwise family's executors (prototypes: graph_ir/opset/depthwise.py), NHWC with filters [kh, kw, C, M].

Only the taps whose input element lies inside x take part, so padding contributes nothing, as in TF's kernels
(tensorflow/core/kernels/depthwise_conv_op.cc): a NaN or inf filter tap that only ever meets padding leaves those
outputs finite. float16, bfloat16 and float32 run in C++ (graph_ir._binding, graph_ir/cc/depthwise.h) on float32
copies, as TF's CPU kernels compute them, with the NumPy paths' arithmetic order (forward and input gradient bitwise
theirs; the filter gradient sums in float64 and rounds once: TF sums in float32 in its own order, within the stated
tolerance). float64 (and dims or attributes past the binding's 2^31 limit) take the NumPy paths: tap by tap, in
blocks of images and output rows holding about BUDGET bytes of temporaries, never a full im2col of the input.

GROUPED holds the same tap-by-tap paths for GE's Conv2D and its gradients with `groups` > 1 (TF's grouped Conv2D,
Keras Conv2D(groups=g)), one matrix product per group, for graph_ir/executors/conv.py to dispatch to."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from graph_ir import _binding
from graph_ir.executors import threads
from graph_ir.executors.common import Executor, at_dtype
from graph_ir.executors.windows import CHUNK_BYTES
from graph_ir.ir.nodes import Node

BUDGET = CHUNK_BYTES  # bytes of temporaries per block (below glibc's mmap threshold: graph_ir/executors/windows.py)
_LIMIT = 1 << 31  # graph_ir._binding's bound on dims, strides, dilations and pads (graph_ir/cc/binding.cc)


def tap_range(size: int, out: int, offset: int, stride: int) -> tuple[int, int]:
    """The output positions [lo, hi) whose input position o * stride + offset lies inside [0, size)."""
    lo = max(0, -(offset // stride))
    return lo, max(lo, min(out, (size - 1 - offset) // stride + 1))


def blocks(n: int, rows: int, row_bytes: int) -> Iterator[tuple[slice, int, int]]:
    """(images, first row, end row) blocks covering n images of `rows` output rows, each needing about BUDGET bytes
    of temporaries at row_bytes per output row of one image (whole images when they fit, else rows of one)."""
    per = max(1, BUDGET // max(row_bytes, 1))
    if per >= rows:
        images = per // max(rows, 1)
        for n0 in range(0, n, images):
            yield slice(n0, min(n0 + images, n)), 0, rows
        return
    for n0 in range(n):
        for r0 in range(0, rows, per):
            yield slice(n0, n0 + 1), r0, min(r0 + per, rows)


def taps(node: Node, in_hw, out_hw, kernel, r0: int, r1: int) -> Iterator[tuple[int, int, slice, slice, slice, slice]]:
    """For each window position (i, j): the output rows and columns (within rows [r0, r1)) whose input element is
    inside x, and the input rows and columns they read: (i, j, out_rows, out_cols, in_rows, in_cols)."""
    a = node.attrs
    (sh, sw), (dh, dw), (top, _, left, _) = a["strides"][1:3], a["dilations"][1:3], a["pads"]
    for i in range(kernel[0]):
        off_h = i * dh - top
        lo, hi = tap_range(in_hw[0], out_hw[0], off_h, sh)
        lo, hi = max(lo, r0), min(hi, r1)
        if lo >= hi:
            continue
        for j in range(kernel[1]):
            off_w = j * dw - left
            c0, c1 = tap_range(in_hw[1], out_hw[1], off_w, sw)
            if c0 >= c1:
                continue
            yield (i, j, slice(lo, hi), slice(c0, c1), slice(lo * sh + off_h, (hi - 1) * sh + off_h + 1, sh),
                   slice(c0 * sw + off_w, (c1 - 1) * sw + off_w + 1, sw))


def _native(node: Node, *arrays: np.ndarray) -> bool:
    """Whether graph_ir._binding computes the node: 16- and 32-bit floats (float64 keeps the NumPy path), every
    attribute and dim (the output's too) below the binding's 2^31 limit."""
    a = node.attrs
    values = (*a["strides"], *a["dilations"], *a["pads"], *node.output_descs[0].shape,
              *(d for x in arrays for d in x.shape))
    return all(x.dtype != np.float64 for x in arrays) and max(values, default=0) < _LIMIT


def _float32(a: np.ndarray) -> np.ndarray:
    """a as C-contiguous native float32 (a copy unless it already is): the buffers the binding accepts."""
    return np.ascontiguousarray(a, np.float32)


def _geometry(node: Node) -> dict:
    a = node.attrs
    return {"strides": list(a["strides"][1:3]), "dilations": list(a["dilations"][1:3]), "pads": list(a["pads"]),
            "threads": threads.count()}


def _bound(kernel, numpy_way, inputs: tuple[int, int], out_dtype) -> Executor:
    """An executor running `kernel` of graph_ir._binding on args[inputs] as float32 into a new output of
    `out_dtype`, rounded to the node's dtype; `numpy_way` where the binding does not apply (_native)."""

    def run(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        a, b = args[inputs[0]], args[inputs[1]]
        if not _native(node, a, b):
            return numpy_way(node, args)
        out = np.empty(node.output_descs[0].shape, out_dtype)
        kernel(_float32(a), _float32(b), out, **_geometry(node))
        return [at_dtype(node, 0, out)]

    return run


def _numpy_depthwise_conv2d(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, f = args[0], np.asarray(args[1], np.float32)
    kh, kw, c, m = f.shape
    n, ho, wo, _ = node.output_descs[0].shape
    y = np.zeros((n, ho, wo, c, m), np.float32)
    with np.errstate(all="ignore"):
        for batch, r0, r1 in blocks(n, ho, wo * c * (2 * m + 1) * 4):
            for i, j, rows, cols, x_rows, x_cols in taps(node, x.shape[1:3], (ho, wo), (kh, kw), r0, r1):
                y[batch, rows, cols] += np.asarray(x[batch, x_rows, x_cols], np.float32)[..., None] * f[i, j]
    return [at_dtype(node, 0, y.reshape(n, ho, wo, c * m))]


def _numpy_backprop_input(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    f, dy = np.asarray(args[1], np.float32), args[2]
    kh, kw, c, m = f.shape
    n, h, w, _ = node.output_descs[0].shape
    _, ho, wo, _ = dy.shape
    per_channel = dy.reshape(n, ho, wo, c, m)
    dx = np.zeros((n, h, w, c), np.float32)
    with np.errstate(all="ignore"):
        for batch, r0, r1 in blocks(n, ho, wo * c * (2 * m + 1) * 4):
            for i, j, rows, cols, x_rows, x_cols in taps(node, (h, w), (ho, wo), (kh, kw), r0, r1):
                g = np.asarray(per_channel[batch, rows, cols], np.float32)
                dx[batch, x_rows, x_cols] += g[..., 0] * f[i, j, :, 0] if m == 1 else (g * f[i, j]).sum(axis=-1)
    return [at_dtype(node, 0, dx)]


def _numpy_backprop_filter(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, dy = args[0], args[2]
    kh, kw, c, m = node.output_descs[0].shape
    n, ho, wo, _ = dy.shape
    per_channel = dy.reshape(n, ho, wo, c, m)
    df = np.zeros((kh, kw, c, m), np.float64)
    with np.errstate(all="ignore"):
        for batch, r0, r1 in blocks(n, ho, wo * c * (3 * m + 1) * 8):
            for i, j, rows, cols, x_rows, x_cols in taps(node, x.shape[1:3], (ho, wo), (kh, kw), r0, r1):
                xs = np.asarray(x[batch, x_rows, x_cols], np.float64)[..., None]
                df[i, j] += (xs * np.asarray(per_channel[batch, rows, cols], np.float64)).sum(axis=(0, 1, 2))
    return [at_dtype(node, 0, df)]


def _work_dtype(a: np.ndarray) -> type:
    """float64 stays float64 (Conv2D's gradients take it); the other floats are computed in float32."""
    return np.float64 if a.dtype == np.float64 else np.float32


def _by_group(a: np.ndarray, groups: int) -> np.ndarray:
    """[..., groups * k] as [groups, P, k] (P: the leading elements)."""
    return a.reshape(-1, groups, a.shape[-1] // groups).transpose(1, 0, 2)


def grouped_conv2d(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """GE Conv2D with `groups` g > 1: x [N, H, W, C], filter [kh, kw, C/g, O]; output channel block k (O/g wide)
    reads input channel block k only, as TF's grouped Conv2D does. Tap by tap, one matrix product per group."""
    x, groups = args[0], node.attrs["groups"]
    work = _work_dtype(x)
    f = np.asarray(args[1], work)
    kh, kw, _, out_channels = f.shape
    n, ho, wo, _ = node.output_descs[0].shape
    y = np.zeros((n, ho, wo, out_channels), work)
    with np.errstate(all="ignore"):
        for batch, r0, r1 in blocks(n, ho, wo * (x.shape[3] + 2 * out_channels) * 8):
            for i, j, rows, cols, x_rows, x_cols in taps(node, x.shape[1:3], (ho, wo), (kh, kw), r0, r1):
                part = np.asarray(x[batch, x_rows, x_cols], work)
                products = np.matmul(_by_group(part, groups), _by_group(f[i, j], groups))  # [g, P, O/g]
                y[batch, rows, cols] += products.transpose(1, 0, 2).reshape(*part.shape[:3], out_channels)
    return [at_dtype(node, 0, y)]


def grouped_conv2d_backprop_input(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """GE Conv2DBackpropInput with `groups` g > 1: each output channel block's gradient goes back to its own input
    channel block through the transposed filter block."""
    f, dy, groups = args[1], args[2], node.attrs["groups"]
    work = _work_dtype(dy)
    f = np.asarray(f, work)
    kh, kw, _, out_channels = f.shape
    n, h, w, c = node.output_descs[0].shape
    _, ho, wo, _ = dy.shape
    dx = np.zeros((n, h, w, c), work)
    with np.errstate(all="ignore"):
        for batch, r0, r1 in blocks(n, ho, wo * (c + 2 * out_channels) * 8):
            for i, j, rows, cols, x_rows, x_cols in taps(node, (h, w), (ho, wo), (kh, kw), r0, r1):
                grad = np.asarray(dy[batch, rows, cols], work)
                back = np.matmul(_by_group(grad, groups), _by_group(f[i, j], groups).transpose(0, 2, 1))
                dx[batch, x_rows, x_cols] += back.transpose(1, 0, 2).reshape(*grad.shape[:3], c)
    return [at_dtype(node, 0, dx)]


def grouped_conv2d_backprop_filter(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """GE Conv2DBackpropFilter with `groups` g > 1: filter block k's gradient sums input channel block k times
    output channel block k's gradient over every output position (in float64)."""
    x, dy, groups = args[0], args[2], node.attrs["groups"]
    kh, kw, in_per_group, out_channels = node.output_descs[0].shape
    n, ho, wo, _ = dy.shape
    df = np.zeros((kh, kw, in_per_group, out_channels), np.float64)
    with np.errstate(all="ignore"):
        for batch, r0, r1 in blocks(n, ho, wo * (x.shape[3] + out_channels) * 16):
            for i, j, rows, cols, x_rows, x_cols in taps(node, x.shape[1:3], (ho, wo), (kh, kw), r0, r1):
                xs = _by_group(np.asarray(x[batch, x_rows, x_cols], np.float64), groups)  # [g, P, C/g]
                ds = _by_group(np.asarray(dy[batch, rows, cols], np.float64), groups)  # [g, P, O/g]
                df[i, j] += np.matmul(xs.transpose(0, 2, 1), ds).transpose(1, 0, 2).reshape(in_per_group, -1)
    return [at_dtype(node, 0, df)]


# The grouped paths of GE's Conv2D family (graph_ir/executors/conv.py dispatches to them when groups > 1).
GROUPED = {
    "Conv2D": grouped_conv2d,
    "Conv2DBackpropFilter": grouped_conv2d_backprop_filter,
    "Conv2DBackpropInput": grouped_conv2d_backprop_input,
}


def _widened(*descs) -> int:
    """The float32 copies the native path makes of 16-bit inputs, and its float32 result before a 16-bit output is
    rounded from it."""
    return sum(d.num_elements * 4 for d in descs if d.dtype.itemsize == 2)


def _fallback(node: Node, *descs) -> int:
    """The NumPy path's blocks (float64, or a dim or attribute past the binding's limit): about BUDGET bytes (and a
    float64 copy of the output)."""
    a = node.attrs
    values = (*a["strides"], *a["dilations"], *a["pads"], *(n for d in descs for n in d.shape))
    wide = any(d.dtype.itemsize == 8 for d in descs)
    return 2 * BUDGET + node.output_descs[0].num_elements * 8 \
        if wide or max(values, default=0) >= _LIMIT else 0


def _forward_workspace(node: Node) -> int:
    x, f, y = node.inputs[0].desc, node.inputs[1].desc, node.output_descs[0]
    return _widened(x, f, y) + _fallback(node, x, f)


def _backprop_input_workspace(node: Node) -> int:
    f, dy, dx = node.inputs[1].desc, node.inputs[2].desc, node.output_descs[0]
    return _widened(f, dy, dx) + _fallback(node, f, dy)


def _backprop_filter_workspace(node: Node) -> int:
    """The float64 sums before rounding, besides the float32 copies of 16-bit inputs."""
    x, dy, df = node.inputs[0].desc, node.inputs[2].desc, node.output_descs[0]
    return _widened(x, dy) + df.num_elements * 8 + _fallback(node, x, dy)


EXECUTORS = {
    # y[n, oh, ow, c*M + m] = sum over the valid taps (i, j), in order, of float32 x * filter products.
    "DepthwiseConv2D": _bound(_binding.depthwise_forward, _numpy_depthwise_conv2d, (0, 1), np.float32),
    # dx[n, ih, iw, c] = sum over the taps (i, j) that reach it, in order, of sum_m dy[n, oh, ow, c*M + m] *
    # filter[i, j, c, m] (float32; the inner sum pairwise, as NumPy's sum).
    "DepthwiseConv2DBackpropInput": _bound(_binding.depthwise_backprop_input, _numpy_backprop_input, (1, 2),
                                           np.float32),
    # df[i, j, c, m] = sum over n, oh, ow of x[n, ih, iw, c] * dy[n, oh, ow, c*M + m], summed in float64 and rounded
    # once to float32.
    "DepthwiseConv2DBackpropFilter": _bound(_binding.depthwise_backprop_filter, _numpy_backprop_filter, (0, 2),
                                            np.float64),
}
WORKSPACE = {
    "DepthwiseConv2D": _forward_workspace,
    "DepthwiseConv2DBackpropInput": _backprop_input_workspace,
    "DepthwiseConv2DBackpropFilter": _backprop_filter_workspace,
}
