"""The filter gradient's products for the im2col way of graph_ir/executors/conv.py: df [kh, kw, C, Cout] = the
windows of x [n, h, w, kh, kw, C] (graph_ir/executors/im2col.py) transposed, times dy [n, h, w, Cout], summed over
all output positions, in parts for threads (graph_ir/executors/threads.py) whose results do not depend on the
thread count."""

from __future__ import annotations

import math

import numpy as np

from graph_ir.executors import gemm, im2col, threads

LANES = 4  # filter gradients summed over positions in this many partials, whatever the thread count
PARTIAL_BYTES = 4 << 20  # the most the partials may hold (the workspace counts it)


def lanes_fit(df_shape, dy_shape, item: int) -> bool:
    """Whether the filter gradient is summed in lanes: the partials within PARTIAL_BYTES, and one output row's
    windows within im2col.PART_BYTES (so the lanes' windows in flight stay within a chunk)."""
    return LANES * math.prod(df_shape) * item <= PARTIAL_BYTES and \
        dy_shape[2] * math.prod(df_shape[:3]) * item <= im2col.PART_BYTES


def in_lanes(df: np.ndarray, view: np.ndarray, dy: np.ndarray) -> None:
    """df [kh, kw, C, Cout] = windows view [n, h, w, kh, kw, C]^T @ dy [n, h, w, Cout] over all positions, in parts
    of at most im2col.PART_BYTES of windows (still in cache when the product reads them). Lane j sums parts j,
    j + LANES, ... into its own partial (gemm's beta = 1), and the partials are added in order: the same result for
    any thread count, and a sum in LANES * parts pieces rather than one long one. 8x64x64x64 by 3x3x64x64 on two
    threads: 17 ms over channel parts, 13 ms so."""
    rows, cout = math.prod(df.shape[:3]), df.shape[3]
    parts = list(im2col.blocks(*dy.shape[:3], rows * view.itemsize, im2col.PART_BYTES))
    if not parts or 0 in view.shape:  # no positions or no channels: df stays zeros
        return
    lanes = min(LANES, len(parts))
    partial = np.empty((lanes, rows, cout), df.dtype)

    def lane(j: int) -> None:
        for i, part in enumerate(parts[j::lanes]):
            block = view[part]
            positions = math.prod(block.shape[:3])
            gemm.matmul(block.reshape(positions, rows).T, dy[part].reshape(positions, cout), out=partial[j],
                        accumulate=i > 0)

    threads.run_parts(lane, range(lanes))
    flat = df.reshape(rows, cout)
    flat[...] = partial[0]
    for j in range(1, lanes):
        flat += partial[j]


def add_products(df: np.ndarray, block: np.ndarray, dy: np.ndarray) -> None:
    """df [kh, kw, C, Cout] += windows block [n, h, w, kh, kw, C]^T @ dy [n, h, w, Cout], over all positions: in
    parts of x's channels, one per thread (each part copies its channels' windows and writes its own rows of df)."""
    positions = math.prod(block.shape[:3])
    cout = dy.shape[3]
    dy_rows = dy.reshape(positions, cout)
    flops = 2 * math.prod(block.shape) * cout
    flat = df.reshape(-1, cout)
    if positions < 2 * threads.count() * threads.MIN_PART_ROWS:  # few positions (deep layers): one copy, then a
        # product split over its output rows (df is small here)
        flat += threads.matmul(block.reshape(positions, flat.shape[0]).T, dy_rows)
        return

    def part(channels: slice) -> None:
        cols = block[..., channels].reshape(positions, -1)
        df[:, :, channels] += gemm.matmul(cols.T, dy_rows).reshape(*df.shape[:2], -1, cout)

    threads.run_parts(part, threads.slices(block.shape[5], threads.pieces_for(flops, threads.MIN_PRODUCT_FLOPS,
                                                                                block.shape[5])))
