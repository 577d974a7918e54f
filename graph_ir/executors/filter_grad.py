"""The filter gradient's products for the im2col way of graph_ir/executors/conv.py: df [kh, kw, C, Cout] = the
windows of x [n, h, w, kh, kw, C] (graph_ir/executors/im2col.py) transposed, times dy [n, h, w, Cout], summed over
all output positions, in parts for threads (graph_ir/executors/threads.py) whose results do not depend on the
thread count."""

from __future__ import annotations

import math

import numpy as np

from graph_ir.executors import gemm, im2col, threads
from graph_ir.opset.conv import same_padding

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

    # each part's product has taps * its channels rows: at least MIN_SPLIT_ROWS, so its bits are the whole one's
    per_part = -(-threads.MIN_SPLIT_ROWS // (block.shape[3] * block.shape[4]))
    threads.run_parts(part, threads.slices(block.shape[5], threads.pieces_for(flops, threads.MIN_PRODUCT_FLOPS,
                                                                                block.shape[5] // per_part)))


def explicit_pads(attrs: dict, x_shape, f_shape) -> bool:
    """Whether `pads` are neither zero (TF's VALID) nor TF's SAME pads for this geometry: only TF's EXPLICIT padding
    gives them, and its CPU filter gradient pads x with zeros that take part in the products
    (tensorflow/core/kernels/conv_grad_filter_ops.cc), so an inf or NaN of out_backprop meeting the padding gives
    NaN (0 * inf), where SAME's and VALID's padding contributes nothing. A node the lowering made from TF's SAME says
    so in its `padding` attribute (graph_ir/opset/conv.py)."""
    pads, (sh, sw), (dh, dw) = list(attrs["pads"]), attrs["strides"][1:3], attrs["dilations"][1:3]
    if not any(pads) or attrs.get("padding") is not None:
        return False
    same = [*same_padding(x_shape[1], f_shape[0], sh, dh)[1:], *same_padding(x_shape[2], f_shape[1], sw, dw)[1:]]
    return pads != same


def padding_nan(df: np.ndarray, dy: np.ndarray, taps_h, taps_w) -> None:
    """Sets df[i, j, :, k] to NaN where tap (i, j) reads padding for an output (o, p) whose dy[:, o, p, k] is inf or
    NaN: what multiplying x's zero padding adds to the sums of the taps inside x (0 * finite adds nothing). Tap i
    reads x for the outputs taps_h[..].writes only (taps not listed read only padding), so the outputs where (i, j)
    reads padding are those outside tap i's rows or outside tap j's columns: df is NaN at (i, j, k) when a bad
    value of channel k lies in either, a test per row tap and per column tap from running counts."""
    bad = (~np.isfinite(dy)).any(axis=0)
    if not bad.any():
        return

    def outside(counts: np.ndarray, taps, k: int) -> np.ndarray:
        """[k, Cout]: whether a bad value lies outside each tap's outputs along one axis (counts: prefix sums)."""
        result = np.broadcast_to(counts[-1] > 0, (k, counts.shape[1])).copy()
        for t in taps:
            result[t.tap] = (counts[t.first] + counts[-1] - counts[t.stop]) > 0
        return result

    rows = np.concatenate([np.zeros((1, bad.shape[2]), np.int64), np.cumsum(bad.any(axis=1), axis=0)])
    cols = np.concatenate([np.zeros((1, bad.shape[2]), np.int64), np.cumsum(bad.any(axis=0), axis=0)])
    nan = outside(rows, taps_h, df.shape[0])[:, None, :] | outside(cols, taps_w, df.shape[1])[None, :, :]
    df[np.broadcast_to(nan[:, :, None, :], df.shape)] = np.nan
