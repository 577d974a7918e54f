"""The resize family's executors (prototypes: graph_ir/opset/resize.py), with TF's CPU arithmetic in float32 step by
step (tensorflow/core/kernels/image/resize_nearest_neighbor_op.cc, resize_bilinear_op.cc and
tensorflow/core/util/image_resizer_state.h): the same scale, the same source coordinates and weights, the same
operations in the same order, and the gradients added in the kernels' order. The block rearrangements are pure data
movement (a pad or crop, a reshape and a transpose)."""

from __future__ import annotations

import math

import numpy as np

from graph_ir.ir.nodes import Node

_F = np.float32


def _scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    """TF's CalculateResizeScale, in float32."""
    if align_corners and out_size > 1:
        return _F(in_size - 1) / _F(out_size - 1)
    return _F(in_size) / _F(out_size)


def nearest_sources(out_size: int, in_size: int, scale: np.float32, attrs) -> np.ndarray:
    """The input index each of out_size positions reads: min(floor or round((i [+ 0.5]) * scale), in_size - 1),
    and >= 0 with half-pixel centers (round: half away from zero, as C's roundf)."""
    at = np.arange(out_size, dtype=_F)
    if attrs["half_pixel_centers"]:
        at = at + _F(0.5)
    at = at * scale
    low = np.floor(at)
    index = low + (at - low >= _F(0.5)) if attrs["align_corners"] else low  # at >= 0: roundf is floor(+1 at .5)
    index = np.minimum(index.astype(np.int64), in_size - 1)
    return np.maximum(index, 0) if attrs["half_pixel_centers"] else index


def _resize_nearest(node: Node, args) -> list[np.ndarray]:
    x = args[0]
    (_, oh, ow, _), a = node.output_descs[0].shape, node.attrs
    rows = nearest_sources(oh, x.shape[1], _scale(x.shape[1], oh, a["align_corners"]), a)
    cols = nearest_sources(ow, x.shape[2], _scale(x.shape[2], ow, a["align_corners"]), a)
    return [x[:, rows[:, None], cols[None, :]]]


def _resize_nearest_grad(node: Node, args) -> list[np.ndarray]:
    grads = args[0]
    (n, oh, ow, c), a = node.output_descs[0].shape, node.attrs
    rows = nearest_sources(grads.shape[1], oh, _scale(oh, grads.shape[1], a["align_corners"]), a)
    cols = nearest_sources(grads.shape[2], ow, _scale(ow, grads.shape[2], a["align_corners"]), a)
    out = np.zeros((n, oh, ow, c), grads.dtype)
    with np.errstate(all="ignore"):  # row-major over grads, as the kernel accumulates
        np.add.at(out, (slice(None), rows[:, None], cols[None, :]), grads)
    return [out]


def bilinear_weights(out_size: int, in_size: int, scale: np.float32, half_pixel_centers: bool):
    """(lower, upper, lerp) per output position, as TF's compute_interpolation_weights: the source coordinate
    (i + 0.5) * scale - 0.5 with half-pixel centers, else i * scale; lower = max(floor, 0), upper = min(ceil,
    in_size - 1), lerp = coordinate - floor."""
    at = np.arange(out_size, dtype=_F)
    at = (at + _F(0.5)) * scale - _F(0.5) if half_pixel_centers else at * scale
    low = np.floor(at)
    lower = np.maximum(low.astype(np.int64), 0)
    upper = np.minimum(np.ceil(at).astype(np.int64), in_size - 1)
    return lower, upper, at - low


def _resize_bilinear(node: Node, args) -> list[np.ndarray]:
    x = args[0].astype(_F)
    (_, oh, ow, _), a = node.output_descs[0].shape, node.attrs
    if (oh, ow) == x.shape[1:3]:  # TF copies a resize to the same size (no arithmetic: inf and NaN pass as they are)
        return [x]
    y0, y1, dy = bilinear_weights(oh, x.shape[1], _scale(x.shape[1], oh, a["align_corners"]), a["half_pixel_centers"])
    x0, x1, dx = bilinear_weights(ow, x.shape[2], _scale(x.shape[2], ow, a["align_corners"]), a["half_pixel_centers"])
    dx, dy = dx[None, None, :, None], dy[None, :, None, None]
    y0, y1, x0, x1 = y0[:, None], y1[:, None], x0[None, :], x1[None, :]
    with np.errstate(all="ignore"):  # each corner gathered at the output's size
        top = x[:, y0, x0] + (x[:, y0, x1] - x[:, y0, x0]) * dx
        bottom = x[:, y1, x0] + (x[:, y1, x1] - x[:, y1, x0]) * dx
        return [top + (bottom - top) * dy]


def _resize_bilinear_grad(node: Node, args) -> list[np.ndarray]:
    """Each gradient g at (y, x) adds g * (1 - dy) * (1 - dx), g * (1 - dy) * dx, g * dy * (1 - dx), g * dy * dx
    onto its top-left, top-right, bottom-left, bottom-right source, in that order, row-major: the kernel's sums."""
    grads = args[0]
    (n, oh, ow, c), a = node.output_descs[0].shape, node.attrs
    rh, rw = grads.shape[1:3]
    y0, y1, dy = bilinear_weights(rh, oh, _scale(oh, rh, a["align_corners"]), a["half_pixel_centers"])
    x0, x1, dx = bilinear_weights(rw, ow, _scale(ow, rw, a["align_corners"]), a["half_pixel_centers"])
    rows = np.stack([y0, y0, y1, y1], axis=-1)[:, None, :]  # [rh, 1, 4]
    cols = np.stack([x0, x1, x0, x1], axis=-1)[None, :, :]  # [1, rw, 4]
    row_weight = np.stack([_F(1) - dy, _F(1) - dy, dy, dy], axis=-1)[None, :, None, :, None]
    col_weight = np.stack([_F(1) - dx, dx, _F(1) - dx, dx], axis=-1)[None, None, :, :, None]
    out = np.zeros((n, oh * ow, c), _F)
    with np.errstate(all="ignore"):
        parts = grads[:, :, :, None, :] * row_weight * col_weight  # [n, rh, rw, 4, c]
        np.add.at(out, (slice(None), (rows * ow + cols).reshape(-1)), parts.reshape(n, -1, c))
    return [out.reshape(n, oh, ow, c)]


def _space_to_batch(node: Node, args) -> list[np.ndarray]:
    x, block = args[0], args[1].reshape(-1).tolist()
    m = len(block)
    pads = [(0, 0), *args[2].reshape(-1, 2).tolist(), *[(0, 0)] * (x.ndim - 1 - m)]
    padded = np.pad(x, pads)
    split = [padded.shape[0]]
    for b, d in zip(block, padded.shape[1:1 + m]):
        split += [d // b, b]
    split += list(padded.shape[1 + m:])
    # [B, s1/b1, b1, ..., rest] -> [b1, ..., bM, B, s1/b1, ..., sM/bM, rest]
    order = [2 + 2 * k for k in range(m)] + [0] + [1 + 2 * k for k in range(m)] + list(range(1 + 2 * m, len(split)))
    return [np.ascontiguousarray(padded.reshape(split).transpose(order)).reshape(node.output_descs[0].shape)]


def _batch_to_space(node: Node, args) -> list[np.ndarray]:
    x, block = args[0], args[1].reshape(-1).tolist()
    m, crops = len(block), args[2].reshape(-1, 2).tolist()
    batch = x.shape[0] // math.prod(block)
    # [b1, ..., bM, B, s1, ..., sM, rest] -> [B, s1, b1, ..., sM, bM, rest]
    split = [*block, batch, *x.shape[1:]]
    order = [m] + [i for k in range(m) for i in (m + 1 + k, k)] + list(range(2 * m + 1, len(split)))
    spread = x.reshape(split).transpose(order).reshape(batch, *(d * b for d, b in zip(x.shape[1:], block)),
                                                       *x.shape[1 + m:])
    index = (slice(None), *(slice(start, spread.shape[1 + k] - end) for k, (start, end) in enumerate(crops)))
    return [np.array(spread[index], copy=True)]


def _depth_to_space(node: Node, args) -> list[np.ndarray]:
    x, b = args[0], node.attrs["block_size"]
    n, h, w, c = x.shape
    blocks = x.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5)
    return [np.array(blocks, copy=True, order="C").reshape(node.output_descs[0].shape)]  # never x's memory


def _space_to_depth(node: Node, args) -> list[np.ndarray]:
    x, b = args[0], node.attrs["block_size"]
    n, h, w, c = x.shape
    blocks = x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
    return [np.array(blocks, copy=True, order="C").reshape(node.output_descs[0].shape)]  # never x's memory


EXECUTORS = {
    "ResizeNearestNeighborV2": _resize_nearest,
    "ResizeNearestNeighborV2Grad": _resize_nearest_grad,
    "ResizeBilinearV2": _resize_bilinear,
    "ResizeBilinearV2Grad": _resize_bilinear_grad,
    "SpaceToBatchND": _space_to_batch,
    "BatchToSpaceND": _batch_to_space,
    "DepthToSpace": _depth_to_space,
    "SpaceToDepth": _space_to_depth,
}
