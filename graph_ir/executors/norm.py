"""The normalization family's executors (prototypes: graph_ir/opset/norm.py), with TF's CPU formulas
(fused_batch_norm_op.cc): float32 statistics, the variance of the centered values, rsqrt(variance + epsilon) * scale
as one factor. The sums accumulate in float64 (reduce.accurate_sum) and are rounded once: not bitwise Eigen's
summation order, at least as close to the exact sums as TF's."""

from __future__ import annotations

import numpy as np

from graph_ir.executors import threads
from graph_ir.executors.common import at_dtype
from graph_ir.executors.reduce import accurate_sum
from graph_ir.ir.nodes import Node
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


def _by_channels(node: Node, x: np.ndarray, part) -> None:
    """part(index) for runs of the channels (index: the tuple that selects them from x), one per thread: each
    channel's statistics and values are computed exactly as one thread would, and the parts' temporaries add up to
    one thread's."""
    c = channel_axis(node.op, node.name, node.attrs, 4)
    runs = threads.slices(x.shape[c], threads.pieces_for(x.nbytes, threads.MIN_PASS_BYTES, x.shape[c]))
    threads.run_parts(lambda run: part((slice(None),) * c + (run,)), runs)


def _batch_norm(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, scale, offset = args[0].astype(np.float32), args[1], args[2]
    if x.size == 0:
        return _empty_batch_norm(node, x, scale.size)
    axes, shape = _axes(node)
    eps = np.float32(node.attrs["epsilon"])
    training = node.attrs["is_training"]
    y = np.empty(x.shape, np.float32)
    mean, variance, batch_variance = (np.empty(scale.size, np.float32) for _ in range(3))

    def part(at: tuple) -> None:
        channels = at[-1]
        xs = x[at]
        if training:
            count = x.size // scale.size
            mean[channels] = accurate_sum(xs, axes) / count
            centered = xs - mean[channels].reshape(shape)
            variance64 = accurate_sum(np.square(centered), axes) / count
            variance[channels] = variance64
            batch_variance[channels] = variance64 * (count / max(count - 1, 1))
        else:
            mean[channels], variance[channels] = args[3][channels], args[4][channels]
            centered = xs - mean[channels].reshape(shape)
            batch_variance[channels] = variance[channels]
        factor = (1 / np.sqrt(variance[channels] + eps)) * scale[channels]
        np.add(centered * factor.reshape(shape), offset[channels].reshape(shape), out=y[at])

    with np.errstate(all="ignore"):
        _by_channels(node, x, part)
    return [at_dtype(node, 0, y), mean, batch_variance, mean.copy(), variance, np.zeros(0, np.float32)]


def _batch_norm_grad(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    dy, x, scale, mean, variance = (a.astype(np.float32) for a in args[:5])
    zero = np.zeros((), np.float32)
    if x.size == 0:  # TF's FusedBatchNormGradV3 on an empty x: zero scale and offset gradients
        vector = np.zeros(scale.size, np.float32)
        return [at_dtype(node, 0, x), vector, vector.copy(), zero, zero.copy()]
    axes, shape = _axes(node)
    eps = np.float32(node.attrs["epsilon"])
    x_backprop = np.empty(x.shape, np.float32)
    scale_backprop, offset_backprop = np.empty(scale.size, np.float32), np.empty(scale.size, np.float32)

    def part(at: tuple) -> None:
        channels = at[-1]
        dys, xs = dy[at], x[at]
        inv_std = 1 / np.sqrt(variance[channels] + eps)
        offset_backprop64 = accurate_sum(dys, axes)
        offset_backprop[channels] = offset_backprop64
        centered = xs - mean[channels].reshape(shape)
        dyc_sum = accurate_sum(dys * centered, axes)
        scale_backprop[channels] = dyc_sum * inv_std
        factor = (scale[channels] * inv_std).reshape(shape)
        if node.attrs["is_training"]:
            count = x.size // scale.size
            dy_mean = (offset_backprop64 / count).astype(np.float32)
            dyc_mean = (dyc_sum / count).astype(np.float32)
            np.multiply(factor, dys - dy_mean.reshape(shape) - centered * (
                dyc_mean / (variance[channels] + eps)).reshape(shape), out=x_backprop[at])
        else:
            np.multiply(dys, factor, out=x_backprop[at])

    with np.errstate(all="ignore"):
        _by_channels(node, x, part)
    return [at_dtype(node, 0, x_backprop), scale_backprop, offset_backprop, zero, zero.copy()]


EXECUTORS = {"BatchNorm": _batch_norm, "BatchNormGrad": _batch_norm_grad}
