"""The conv family's executors (prototypes: graph_ir/opset/conv.py), NHWC and HWIO. Convolutions gather the windows
(a strided view) and multiply them as one float32 matrix product: BLAS's summation order, not Eigen's (within the
stated tolerance). Max pooling is exact, with TF's CPU rules (NaN skipped, each window starts at the lowest finite
value), and its gradient goes to the first maximal element of each window in row-major order, as TF's CPU kernel
routes it; average pooling divides by the window's count inside the input."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from graph_ir.executors.common import at_dtype, wide
from graph_ir.nodes import Node
from graph_ir.opset.conv import pool_geometry


def _windows(node: Node, x: np.ndarray, k: tuple[int, int], ho: int, wo: int) -> np.ndarray:
    """[N, Ho, Wo, kh, kw, C] views of the padded x under each output position."""
    a = node.attrs
    sh, sw, dh, dw = a["strides"][1], a["strides"][2], a["dilations"][1], a["dilations"][2]
    top, bottom, left, right = a["pads"]
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))
    span = ((k[0] - 1) * dh + 1, (k[1] - 1) * dw + 1)
    view = sliding_window_view(xp, span, axis=(1, 2))[:, ::sh, ::sw, :, ::dh, ::dw][:, :ho, :wo]
    return view.transpose(0, 1, 2, 4, 5, 3)


def _conv2d(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, f = wide(args[0]), wide(args[1])
    ho, wo = node.output_descs[0].shape[1:3]
    cols = _windows(node, x, f.shape[:2], ho, wo).reshape(-1, f.shape[0] * f.shape[1] * f.shape[2])
    with np.errstate(all="ignore"):
        y = (cols @ f.reshape(-1, f.shape[3])).reshape(x.shape[0], ho, wo, f.shape[3])
    return [at_dtype(node, 0, y)]


def _conv2d_backprop_filter(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, dy = wide(args[0]), wide(args[2])
    f_shape = node.output_descs[0].shape
    ho, wo = dy.shape[1:3]
    cols = _windows(node, x, f_shape[:2], ho, wo).reshape(-1, f_shape[0] * f_shape[1] * f_shape[2])
    with np.errstate(all="ignore"):
        df = cols.T @ dy.reshape(-1, f_shape[3])
    return [at_dtype(node, 0, df.reshape(f_shape))]


def _conv2d_backprop_input(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    f, dy = wide(args[1]), wide(args[2])
    a, x_shape = node.attrs, node.output_descs[0].shape
    sh, sw, dh, dw = a["strides"][1], a["strides"][2], a["dilations"][1], a["dilations"][2]
    top, bottom, left, right = a["pads"]
    n, ho, wo, _ = dy.shape
    kh, kw, c, _ = f.shape
    with np.errstate(all="ignore"):
        cols = (dy.reshape(-1, f.shape[3]) @ f.reshape(-1, f.shape[3]).T).reshape(n, ho, wo, kh, kw, c)
        dxp = np.zeros((n, x_shape[1] + top + bottom, x_shape[2] + left + right, c), np.float32)
        _add_taps(dxp, lambda i, j: cols[:, :, :, i, j], (kh, kw), (sh, sw), (dh, dw))
    return [at_dtype(node, 0, dxp[:, top:top + x_shape[1], left:left + x_shape[2]])]


def _add_taps(out: np.ndarray, tap, kernel, strides, dilations) -> None:
    """Adds tap(i, j) ([N, Ho, Wo, C]: window position (i, j) under every output position) onto the padded input
    `out` at the positions it was read from; overlapping windows add up."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    for i in range(kh):
        for j in range(kw):
            part = tap(i, j)
            ho, wo = part.shape[1:3]
            out[:, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw] += part


def _pool_windows(node: Node, x: np.ndarray, fill: float) -> tuple[np.ndarray, tuple[int, int], tuple[int, int]]:
    """[N, Ho, Wo, C, kh, kw] windows of x padded with `fill`, and the padding before."""
    a = node.attrs
    (kh, kw), (sh, sw) = a["ksize"][1:3], a["strides"][1:3]
    ho, wo, (top, bottom, left, right) = pool_geometry(node.op, node.name, a, x.shape)
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=fill)
    return sliding_window_view(xp, (kh, kw), axis=(1, 2))[:, ::sh, ::sw][:, :ho, :wo], (top, left), xp.shape


def _max_pool(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    # TF's CPU kernel starts each window at the dtype's lowest finite value and keeps `max` of it and each element
    # inside the input: NaN never wins, -inf gives the lowest finite value.
    lowest = np.finfo(args[0].dtype).min
    windows, _, _ = _pool_windows(node, wide(args[0]), -np.inf)
    with np.errstate(all="ignore"):
        y = np.fmax.reduce(windows, axis=(4, 5))
    return [at_dtype(node, 0, np.maximum(np.where(np.isnan(y), lowest, y), lowest))]


def _counts(node: Node, shape) -> np.ndarray:
    """How many elements of each window lie inside the input: [1, Ho, Wo, 1]."""
    windows, _, _ = _pool_windows(node, np.ones((1, *shape[1:3], 1), np.float32), 0.0)
    return windows.sum(axis=(4, 5))


def _avg_pool(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x = wide(args[0])
    windows, _, _ = _pool_windows(node, x, 0.0)
    with np.errstate(all="ignore"):
        return [at_dtype(node, 0, windows.sum(axis=(4, 5)) / _counts(node, x.shape))]


def _scatter(node: Node, shape, per_window: np.ndarray, mask) -> np.ndarray:
    """Adds per_window[n, h, w, c, i, j] (times mask) back onto the input positions of each window."""
    a = node.attrs
    (kh, kw), (sh, sw) = a["ksize"][1:3], a["strides"][1:3]
    _, (top, left), padded = _pool_windows(node, np.zeros((1, *shape[1:3], 1), np.float32), 0.0)
    out = np.zeros((shape[0], padded[1], padded[2], shape[3]), np.float32)
    # np.where, not a product: a NaN or Inf gradient reaches only its own element, as in TF
    _add_taps(out, lambda i, j: per_window[..., i, j] if mask is None else
              np.where(mask[..., i, j], per_window[..., i, j], 0), (kh, kw), (sh, sw), (1, 1))
    return out[:, top:top + shape[1], left:left + shape[2]]


def _routes(node: Node, x: np.ndarray, lowest: float) -> np.ndarray:
    """[N, Ho, Wo, C, kh, kw] True at the element of each window that TF's kernel in a tf.function gives the
    gradient: starting from the dtype's lowest finite value at the window's first (top-left) position, it walks the
    window in row-major order and takes each element greater than the best so far. So the first of the maxima wins,
    NaN never wins, and a window with nothing above the lowest value routes to its first position (dropped if that
    is padding)."""
    windows, _, _ = _pool_windows(node, x, -np.inf)
    inside = _pool_windows(node, np.ones((1, *x.shape[1:3], 1), bool), False)[0]
    flat, inside = windows.reshape(*windows.shape[:4], -1), inside.reshape(*inside.shape[:4], -1)
    keyed = np.where(inside & ~np.isnan(flat), flat, -np.inf)
    best = keyed.max(axis=-1, keepdims=True)
    pick = np.where(best[..., 0] > lowest, np.argmax(keyed == best, axis=-1), 0)
    routes = np.zeros(flat.shape, bool)
    np.put_along_axis(routes, pick[..., None], True, axis=-1)
    return routes.reshape(windows.shape)


def _max_pool_grad(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, grad = wide(args[0]), wide(args[2])
    routes = _routes(node, x, float(np.finfo(args[0].dtype).min))
    per_window = np.broadcast_to(grad[..., None, None], routes.shape)
    with np.errstate(all="ignore"):
        return [at_dtype(node, 0, _scatter(node, x.shape, per_window, routes))]


def _avg_pool_grad(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    shape, grad = node.output_descs[0].shape, wide(args[1])
    share = grad / _counts(node, shape)
    kh, kw = node.attrs["ksize"][1:3]
    per_window = np.broadcast_to(share[..., None, None], (*share.shape, kh, kw))
    with np.errstate(all="ignore"):
        return [at_dtype(node, 0, _scatter(node, shape, per_window, None))]


EXECUTORS = {
    "Conv2D": _conv2d,
    "Conv2DBackpropFilter": _conv2d_backprop_filter,
    "Conv2DBackpropInput": _conv2d_backprop_input,
    "MaxPool": _max_pool,
    "AvgPool": _avg_pool,
    "MaxPoolGrad": _max_pool_grad,
    "AvgPoolGrad": _avg_pool_grad,
}
