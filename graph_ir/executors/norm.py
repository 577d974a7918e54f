"""The normalization family's executors (prototypes: graph_ir/opset/norm.py), with TF's CPU formulas
(fused_batch_norm_op.cc): float32 statistics, the variance of the centered values, rsqrt(variance + epsilon) * scale
as one factor. The sums accumulate in float64 (reduce.accurate_sum) and are rounded once: not bitwise Eigen's
summation order, at least as close to the exact sums as TF's."""

from __future__ import annotations

import numpy as np

from graph_ir.executors.common import at_dtype
from graph_ir.executors.reduce import accurate_sum
from graph_ir.nodes import Node
from graph_ir.opset.norm import channel_axis


def _axes(node: Node) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The reduced axes, and the shape that broadcasts a per-channel vector against x."""
    c = channel_axis(node.op, node.name, node.attrs, 4)
    return tuple(k for k in range(4) if k != c), tuple(-1 if k == c else 1 for k in range(4))


def _empty_batch_norm(node: Node, x: np.ndarray, depth: int) -> list[np.ndarray]:
    """TF's FusedBatchNormV3 on an empty x (fused_batch_norm_op.cc returns early): y empty, batch_mean and
    batch_variance NaN, the saved mean and variance 0, in training and in inference alike."""
    nan, zero = np.full(depth, np.nan, np.float32), np.zeros(depth, np.float32)
    return [at_dtype(node, 0, x), nan, nan.copy(), zero, zero.copy(), np.zeros(0, np.float32)]


def _batch_norm(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, scale, offset = args[0].astype(np.float32), args[1], args[2]
    if x.size == 0:
        return _empty_batch_norm(node, x, scale.size)
    axes, shape = _axes(node)
    eps = np.float32(node.attrs["epsilon"])
    with np.errstate(all="ignore"):
        if node.attrs["is_training"]:
            count = x.size // scale.size
            mean = (accurate_sum(x, axes) / count).astype(np.float32)
            centered = x - mean.reshape(shape)
            variance64 = accurate_sum(np.square(centered), axes) / count
            variance = variance64.astype(np.float32)
            batch_variance = (variance64 * (count / max(count - 1, 1))).astype(np.float32)
        else:
            mean, variance = args[3], args[4]
            centered = x - mean.reshape(shape)
            batch_variance = variance
        factor = (1 / np.sqrt(variance + eps)) * scale
        y = centered * factor.reshape(shape) + offset.reshape(shape)
    return [at_dtype(node, 0, y), mean.astype(np.float32), batch_variance.astype(np.float32),
            mean.astype(np.float32), variance.astype(np.float32), np.zeros(0, np.float32)]


def _batch_norm_grad(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    dy, x, scale, mean, variance = (a.astype(np.float32) for a in args[:5])
    zero = np.zeros((), np.float32)
    if x.size == 0:  # TF's FusedBatchNormGradV3 on an empty x: zero scale and offset gradients
        vector = np.zeros(scale.size, np.float32)
        return [at_dtype(node, 0, x), vector, vector.copy(), zero, zero.copy()]
    axes, shape = _axes(node)
    eps = np.float32(node.attrs["epsilon"])
    with np.errstate(all="ignore"):
        inv_std = 1 / np.sqrt(variance + eps)
        offset_backprop64 = accurate_sum(dy, axes)
        offset_backprop = offset_backprop64.astype(np.float32)
        centered = x - mean.reshape(shape)
        dyc_sum = accurate_sum(dy * centered, axes)
        scale_backprop = (dyc_sum * inv_std).astype(np.float32)
        if node.attrs["is_training"]:
            count = x.size // scale.size
            dy_mean = (offset_backprop64 / count).astype(np.float32)
            dyc_mean = (dyc_sum / count).astype(np.float32)
            x_backprop = (scale * inv_std).reshape(shape) * (
                dy - dy_mean.reshape(shape) - centered * (dyc_mean / (variance + eps)).reshape(shape))
        else:
            x_backprop = dy * (scale * inv_std).reshape(shape)
    return [at_dtype(node, 0, x_backprop), scale_backprop.astype(np.float32), offset_backprop.astype(np.float32),
            zero, zero.copy()]


EXECUTORS = {"BatchNorm": _batch_norm, "BatchNormGrad": _batch_norm_grad}
