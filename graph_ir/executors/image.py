"""The image family's executors (prototypes: graph_ir/opset/image.py): ImageProjectiveTransformV2 as TF's CPU kernel
computes ImageProjectiveTransformV3 (tensorflow/core/kernels/image/image_ops.h, ProjectiveGenerator and
MapCoordinate), operation for operation in float32 (TF's build has no FMA contraction: every product and sum is
rounded on its own), so the result is TF's bit for bit:
- the output pixel (x, y) reads the input at ((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k), k = c0 x + c1 y + 1;
  k == 0 gives fill_value;
- fill_mode maps an outside coordinate in (REFLECT, WRAP and NEAREST, each clamped to [0, len - 1]) with TF's own
  float and integer steps; CONSTANT leaves it, and the neighbours outside the image read as fill_value;
- NEAREST rounds half away from zero (std::round); BILINEAR weighs the four neighbours in float32 (a neighbour
  outside the image reads as fill_value), the values read as float32 (float64 images too, as TF's kernel reads
  them) and the result converted to the image dtype (truncated toward zero for integers)."""

from __future__ import annotations

import numpy as np

from graph_ir.executors.common import Executor
from graph_ir.ir.nodes import Node

_F = np.float32


def _clamp(v: np.ndarray, length: int) -> np.ndarray:
    """Eigen's scalar_clamp_op(0, len - 1): min(max(v, 0), len - 1) with std::max / std::min's operand order (NaN
    stays NaN)."""
    v = np.where(v < 0, _F(0), v)
    return np.where(_F(length - 1) < v, _F(length - 1), v)


def _truncated(v: np.ndarray) -> np.ndarray:
    """static_cast<DenseIndex>(float): toward zero."""
    with np.errstate(invalid="ignore"):
        return np.trunc(v).astype(np.int64)


def _outside_mapped(low, high):
    """TF's MapCoordinate: a coordinate below 0 mapped by low(v, len), one above len - 1 by high(v, len) (both 0 when
    len <= 1), then clamped to [0, len - 1]."""

    def run(v: np.ndarray, length: int) -> np.ndarray:
        below, above = v < 0, v > _F(length - 1)
        if length <= 1:
            return _clamp(np.where(below | above, _F(0), v), length)
        return _clamp(np.where(below, low(v, length), np.where(above, high(v, length), v)), length)

    return run


def _reflect_low(v: np.ndarray, length: int) -> np.ndarray:
    sz2 = 2 * length
    low = np.where(v < _F(sz2), (sz2 * _truncated(-v / _F(sz2))).astype(_F) + v, v)
    return np.where(low < _F(-length), low + _F(sz2), -low - _F(1))


def _reflect_high(v: np.ndarray, length: int) -> np.ndarray:
    sz2 = 2 * length
    high = v - (sz2 * _truncated(v / _F(sz2))).astype(_F)
    return np.where(high >= _F(length), _F(sz2) - high - _F(1), high)


def _wrap_low(v: np.ndarray, length: int) -> np.ndarray:
    return v + (length * (_truncated(-v / _F(length - 1)) + 1)).astype(_F)


def _wrap_high(v: np.ndarray, length: int) -> np.ndarray:
    return v - (length * _truncated(v / _F(length - 1))).astype(_F)


_MAPS = {"REFLECT": _outside_mapped(_reflect_low, _reflect_high), "WRAP": _outside_mapped(_wrap_low, _wrap_high),
         "CONSTANT": lambda v, length: v, "NEAREST": _clamp}


def _round_half_away(v: np.ndarray) -> np.ndarray:
    wide = v.astype(np.float64)  # |v| + 0.5 is exact in float64
    return np.sign(wide) * np.floor(np.abs(wide) + 0.5)


def _projective(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    images, transforms = args[0], args[1].astype(_F)
    dtype = images.dtype
    fill = np.asarray(args[3] if len(args) > 3 and args[3] is not None else 0).reshape(-1)[0].astype(dtype)
    batch, height, width, _ = node.output_descs[0].shape
    in_h, in_w = images.shape[1:3]
    with np.errstate(all="ignore"):
        oy, ox = (a.astype(_F)[None] for a in np.meshgrid(np.arange(height), np.arange(width), indexing="ij"))
        t = [transforms[:, k].reshape(-1, 1, 1) for k in range(8)]
        projection = t[6] * ox + t[7] * oy + _F(1)
        x = (t[0] * ox + t[1] * oy + t[2]) / projection
        y = (t[3] * ox + t[4] * oy + t[5]) / projection
        x = np.broadcast_to(_MAPS[node.attrs["fill_mode"]](x, in_w), (batch, height, width))
        y = np.broadcast_to(_MAPS[node.attrs["fill_mode"]](y, in_h), (batch, height, width))
        at_infinity = np.broadcast_to(projection == 0, (batch, height, width))
        b = np.arange(batch).reshape(-1, 1, 1)

        def read(row: np.ndarray, col: np.ndarray) -> np.ndarray:
            """images[b, row, col, :], fill where (row, col) is outside the image."""
            inside = (row >= 0) & (row < in_h) & (col >= 0) & (col < in_w)
            got = images[b, np.where(inside, row, 0), np.where(inside, col, 0)]
            return np.where(inside[..., None], got, fill)

        if node.attrs["interpolation"] == "NEAREST":
            out = read(_truncated(_round_half_away(y)), _truncated(_round_half_away(x)))
        else:
            y0, x0 = np.floor(y), np.floor(x)
            y1, x1 = y0 + _F(1), x0 + _F(1)
            r0, r1, c0, c1 = _truncated(y0), _truncated(y1), _truncated(x0), _truncated(x1)
            wx0, wx1 = (x1 - x)[..., None], (x - x0)[..., None]
            top = wx0 * read(r0, c0).astype(_F) + wx1 * read(r0, c1).astype(_F)
            bottom = wx0 * read(r1, c0).astype(_F) + wx1 * read(r1, c1).astype(_F)
            out = ((y1 - y)[..., None] * top + (y - y0)[..., None] * bottom)
            out = (np.trunc(out) if dtype.kind in "iu" else out).astype(dtype)
        return [np.where(at_infinity[..., None], fill, out).astype(dtype)]


EXECUTORS: dict[str, Executor] = {"ImageProjectiveTransformV2": _projective}
