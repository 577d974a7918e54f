"""Convolutions computed directly in C++ (graph_ir._binding.conv2d_direct, graph_ir/cc/direct_conv.h), for the
executors in graph_ir/executors/conv.py: float32 NHWC by a filter packed in blocks of output channels, with no
im2col copy, over the executors' threads. Only the valid taps of each output are summed (padding contributes
nothing, as in TF's kernels with SAME padding), so unlike im2col it needs no finite filter to be exact.

It runs on CPUs with AVX-512, where it is the faster way for images of at least MIN_POSITIONS outputs, and for
smaller ones with filters of at most SMALL_FILTER elements: VGG16's 3x3 layers on two threads (8 images; im2col and
oneMKL's sgemm against this) at 64x64x64 18.9 -> 7.9 ms, 32x32x128 10.8 -> 8.7, 16x16x256 11.1 -> 7.9, 8x8x512
9.3-9.7 either way, 4x4x512 2.9 -> 3.9 (small images: each block's pass over the filter serves fewer outputs, and
more of their taps are padding)."""

from __future__ import annotations

import math
import os

import numpy as np

from graph_ir import _binding
from graph_ir.executors import threads
from graph_ir.executors.common import all_finite

MIN_POSITIONS = 196  # output positions an image (14x14) from which the direct way is the faster one
# ... and, for smaller images, filters up to this many elements (3x3x256x256): 8 images of 8x8x128 by 3x3x128x128
# 1.02 -> 0.62 ms, 4x4x256 by 3x3x256x256 1.04 -> 0.90; but 4x4x512 by 3x3x512x512 2.85 -> 3.94.
SMALL_FILTER = 9 * 256 * 256
# Each output is one float32 sum over its taps and channels in (i, j, c) order, as im2col's products and oneDNN's
# kernels sum: windows of more (kh * kw * C) go tap by tap (graph_ir/executors/conv.py), in shorter sums.
MAX_WINDOW = 8192
# The filter gradient the direct way (graph_ir/cc/direct_conv_filter.h), against im2col and oneMKL on two threads, is
# the faster one for small images (8x8x512 by 3x3x512x512: 12.5 -> 11.1 ms, 4x4x512 7.5 -> 4.3), and from 14x14 up
# to 64 channels in and out (8x64x64x64: 12.8 -> 12.1, 8x32x32x32: 1.17 -> 0.87), but not for larger images with
# more channels (8x32x32x128: 11.1 -> 14.4). Its sums are also closer to float64 than TF's, where im2col's long
# float32 products over few positions are not (tests/graph_ir/test_accuracy.py).
MAX_FILTER_CHANNELS = 64
SMALL_IMAGE = 64  # output positions an image up to which the filter gradient goes the direct way at any width
_LIMIT = 1 << 31  # the binding's bound on every dim, stride, dilation and pad
_SUPPORTED = _binding.conv2d_direct_supported()


def _runs_here(attrs: dict, *shapes) -> bool:
    """AVX-512 here, and every dim, stride, dilation and pad within the binding's bound."""
    numbers = [d for shape in shapes for d in shape] + [*attrs["strides"], *attrs["dilations"], *attrs["pads"]]
    return _SUPPORTED and max(numbers) < _LIMIT


def fits(attrs: dict, x_shape, f_shape, out_shape) -> bool:
    """Whether x [N, H, W, C] by f [kh, kw, C, O] into out [N, Ho, Wo, O] runs here the direct way."""
    return _runs_here(attrs, x_shape, f_shape, out_shape) and math.prod(f_shape[:3]) <= MAX_WINDOW and (
        out_shape[1] * out_shape[2] >= MIN_POSITIONS or math.prod(f_shape) <= SMALL_FILTER)


def filter_fits(attrs: dict, x_shape, f_shape, dy_shape) -> bool:
    """Whether the filter gradient f_shape [kh, kw, C, O] of x and dy runs here the direct way."""
    positions = dy_shape[1] * dy_shape[2]
    return _runs_here(attrs, x_shape, f_shape, dy_shape) and (positions <= SMALL_IMAGE or (
        positions >= MIN_POSITIONS and max(f_shape[2], f_shape[3]) <= MAX_FILTER_CHANNELS))


def filter_gradient(attrs: dict, x: np.ndarray, dy: np.ndarray, f_shape) -> np.ndarray:
    """float32 df [kh, kw, C, O]: the sum over the output positions whose tap (i, j) reads inside x of
    x[position read] (outer) dy[output position], per tap (attrs: strides, dilations, pads)."""
    df = np.empty(f_shape, np.float32)
    _binding.conv2d_direct_filter(np.ascontiguousarray(x, np.float32), np.ascontiguousarray(dy, np.float32), df,
                                  list(attrs["strides"][1:3]), list(attrs["dilations"][1:3]), list(attrs["pads"]),
                                  threads.count())
    return df


def filter_bytes(f_shape) -> int:
    """The filter gradient's working memory: each thread's float64 sums of one block of 6 input by up to 64 output
    channels over all taps (graph_ir/cc/direct_conv_filter.h), for each thread of the C++ pool (one a CPU)."""
    return (os.cpu_count() or 1) * f_shape[0] * f_shape[1] * 6 * 64 * 8


def packed_bytes(f_shape) -> int:
    """The working memory: the filter packed in blocks of 64 output channels at most (zero lanes past O)."""
    return math.prod(f_shape[:3]) * -(-f_shape[3] // 16) * 16 * 4 + f_shape[2] * 4


def convolve(attrs: dict, x: np.ndarray, f: np.ndarray, out_shape, flipped: bool = False) -> np.ndarray:
    """float32 y [N, Ho, Wo, O] = x convolved by f [kh, kw, C, O] (attrs: strides, dilations, pads). flipped: by f
    [kh, kw, O, C] flipped in H and W with its channel axes swapped, as the transposed convolution (the stride-1
    input gradient) reads the forward filter."""
    x = np.ascontiguousarray(x, np.float32)
    f = np.ascontiguousarray(f, np.float32)
    y = np.empty(out_shape, np.float32)
    finite = all_finite(f)  # else each output sums its own taps only
    _binding.conv2d_direct(x, f, y, list(attrs["strides"][1:3]), list(attrs["dilations"][1:3]), list(attrs["pads"]),
                           flipped, finite, threads.count())
    return y
