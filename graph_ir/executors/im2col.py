"""im2col for the convolutions (graph_ir/executors/conv.py): the windows of the zero-padded input as the rows of a
matrix, made a chunk of at most CHUNK_BYTES at a time, so that one matrix product per chunk computes the
convolution. Chunks are split into parts of their output positions, which threads claim (graph_ir/executors/threads.py),
each copying and multiplying its own windows."""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from graph_ir.executors import gemm, threads
from graph_ir.executors.windows import CHUNK_BYTES

MAX_WINDOW = 8192  # kh * kw * C: above it, per tap is faster (im2col's chunks no longer fit the caches)
# Windows a part copies and multiplies: small enough that they are still in the core's L2 cache when the product
# reads them. 8x32x32x128 by 3x3x128x128 on two threads: 11.3 ms in 4 parts of 4.7 MB, 8.9 ms in 2 MiB parts.
PART_BYTES = 2 * 2**20


def fits(attrs: dict, x_shape, f_shape, out_hw, item: int) -> bool:
    """Whether im2col is the faster way and its memory stays small: a window of at most MAX_WINDOW values,
    the padded x within twice x plus one chunk, and one output row of windows within a chunk (`item` bytes each)."""
    top, bottom, left, right = attrs["pads"]
    n, h, w, c = x_shape
    window = f_shape[0] * f_shape[1] * c
    padded = n * (h + top + bottom) * (w + left + right) * c * item
    return window <= MAX_WINDOW and padded <= 2 * n * h * w * c * item + CHUNK_BYTES and \
        out_hw[1] * window * item <= CHUNK_BYTES


def windows(a: dict, x: np.ndarray, k_hw, out_hw) -> np.ndarray:
    """[N, Ho, Wo, kh, kw, C] views of the zero-padded x under each output position (im2col's rows), for the attrs
    `a` (strides, dilations, pads)."""
    (sh, sw), (dh, dw), (top, bottom, left, right) = a["strides"][1:3], a["dilations"][1:3], a["pads"]
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0))) if any(a["pads"]) else x
    span = ((k_hw[0] - 1) * dh + 1, (k_hw[1] - 1) * dw + 1)
    view = sliding_window_view(xp, span, axis=(1, 2))[:, ::sh, ::sw, :, ::dh, ::dw][:, :out_hw[0], :out_hw[1]]
    return view.transpose(0, 1, 2, 4, 5, 3)


def blocks(n: int, ho: int, wo: int, position_bytes: int, limit: int = CHUNK_BYTES):
    """(images, rows) blocks of the output positions whose `position_bytes` each fit `limit`: whole images when one
    fits, else runs of output rows (one row at least: callers keep a row within a chunk)."""
    per_row = max(wo * position_bytes, 1)
    if ho * per_row <= limit:
        step = max(limit // (ho * per_row), 1)
        for n0 in range(0, n, step):
            yield slice(n0, min(n0 + step, n)), slice(0, ho)
    else:
        step = max(limit // per_row, 1)
        for n0 in range(n):
            for h0 in range(0, ho, step):
                yield slice(n0, n0 + 1), slice(h0, min(h0 + step, ho))


def chunks(view: np.ndarray):
    """(images, rows, block): im2col's windows [N, Ho, Wo, kh, kw, C] in blocks whose matrix (block.reshape(-1, K),
    a copy the caller makes and drops in one expression) holds at most CHUNK_BYTES."""
    for images, rows in blocks(*view.shape[:3], math.prod(view.shape[3:]) * view.itemsize):
        yield images, rows, view[images, rows]


def parts(images: slice, rows: slice, wo: int, position_bytes: int) -> list[tuple[slice, slice]]:
    """A chunk's block of output positions (images, rows) as parts of at most PART_BYTES of windows each (or one
    output row), for threads to claim: the same parts for any thread count, and as the parts cover the chunk, those
    in flight at once never hold more than it."""
    return [(slice(images.start + i.start, images.start + i.stop), slice(rows.start + r.start, rows.start + r.stop))
            for i, r in blocks(images.stop - images.start, rows.stop - rows.start, wo, position_bytes, PART_BYTES)]


def convolve(attrs: dict, x: np.ndarray, f: np.ndarray, out_shape, dtype, flipped: bool = False) -> np.ndarray:
    """The convolution of x by f [kh, kw, C, O] (attrs: strides, dilations, pads) by im2col: each chunk's windows
    copied as the rows of a matrix and multiplied by the filter, in parts of the chunk's positions, one per thread.
    flipped: by f flipped in H and W with its channel axes swapped ([kh, kw, O, C] read as the transposed
    convolution does), without copying f so: the windows are taken in reverse tap order instead, and the product
    reads f's taps' rows as the columns of its matrix."""
    y = np.empty(out_shape, dtype)
    view = windows(attrs, x, f.shape[:2], out_shape[1:3])
    if flipped:
        view = view[:, :, :, ::-1, ::-1]
        # [tap, C, O] as [C, tap * O]: contiguous rows moved (cheap); its transpose is the product's matrix.
        taps, inputs, outputs = f.shape[0] * f.shape[1], f.shape[2], f.shape[3]
        rows = np.ascontiguousarray(f.reshape(taps, inputs, outputs).transpose(1, 0, 2))
        fmat = rows.reshape(inputs, taps * outputs).T
    else:
        fmat = f.reshape(math.prod(f.shape[:3]), f.shape[3])

    def product(part: tuple[slice, slice]) -> None:  # this part's windows, copied, times the filter
        block = view[part]
        positions = math.prod(block.shape[:3])
        gemm.matmul(block.reshape(positions, fmat.shape[0]), fmat, out=y[part].reshape(positions, -1))

    for images, rows, block in chunks(view):
        positions = math.prod(block.shape[:3])
        if threads.count() > 1 and positions < 2 * threads.count() * threads.MIN_PART_ROWS:  # few positions (deep
            # layers): split the filter's columns instead
            threads.matmul(block.reshape(positions, fmat.shape[0]), fmat, out=y[images, rows].reshape(positions, -1))
        else:
            threads.run_parts(product, parts(images, rows, block.shape[2], math.prod(block.shape[3:]) * block.itemsize))
    return y
