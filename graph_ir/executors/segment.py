"""The segment family's executors (prototypes: graph_ir/opset/segment.py), as TF's CPU kernels compute them
(tensorflow/core/kernels/segment_reduction_ops_impl.h): each output slice folds its rows in index order, starting from
TF's initial value (0 for sums, the dtype's lowest for max, highest for min, 1 for products). The unsorted max and min
folds are Eigen's cwiseMax / cwiseMin of (row, output): `row < out ? out : row` and `out < row ? out : row`, so a NaN
row replaces the output and the next row replaces a NaN. The sorted SegmentMax copies a segment of one row, gives 0
for an empty one (as TF documents), and reduces a longer one as Eigen's MaxReducer does on x86 (see _sorted): NaN
handling there differs between the packets of 8 columns and the columns after them, and is matched lane by lane."""

from __future__ import annotations

import math

import numpy as np

from graph_ir.executors.array import check_segment_ids
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Node
from graph_ir.opset.segment import sorted_segment_count


def _extreme(dtype: np.dtype, largest: bool):
    info = np.finfo(dtype) if np.issubdtype(dtype, np.floating) or dtype.kind == "V" else np.iinfo(dtype)
    return info.max if largest else info.min


def fold_in_order(out: np.ndarray, ids: np.ndarray, rows: np.ndarray, step) -> None:
    """out[ids[k]] = step(rows[k], out[ids[k]]) for k in index order: rows of one id in order, distinct ids at once
    (one pass per rank of a row within its segment, so at most as many passes as rows)."""
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]]) if ids.size else np.zeros(0, np.int64)
    rank = np.empty(ids.size, np.int64)
    rank[order] = np.arange(ids.size) - np.repeat(starts, np.diff(np.r_[starts, ids.size]))
    for r in range(int(rank.max()) + 1 if ids.size else 0):
        pick = np.flatnonzero(rank == r)
        out[ids[pick]] = step(rows[pick], out[ids[pick]])


def _unsorted(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, ids = args[0], args[1]
    out_shape = node.output_descs[0].shape
    flat_ids = ids.reshape(-1).astype(np.int64)
    check_segment_ids(node, flat_ids, out_shape[0])
    kind = node.type[len("UnsortedSegment"):]
    start = {"Max": _extreme(x.dtype, False), "Min": _extreme(x.dtype, True), "Prod": 1}[kind]
    out = np.full(out_shape, start, x.dtype)
    keep = flat_ids >= 0
    rows = x.reshape(flat_ids.size, *x.shape[ids.ndim:])[keep]
    with np.errstate(all="ignore"):
        if kind == "Prod":
            np.multiply.at(out, flat_ids[keep], rows)  # in index order, as TF multiplies
        elif kind == "Max":
            fold_in_order(out, flat_ids[keep], rows, lambda row, acc: np.where(row < acc, acc, row))
        else:
            fold_in_order(out, flat_ids[keep], rows, lambda row, acc: np.where(acc < row, acc, row))
    return [out]


def _sorted(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, ids = args[0], args[1].astype(np.int64)
    count = sorted_segment_count(node.type, node.name, ids, x.shape[0])
    if (count, *x.shape[1:]) != tuple(node.output_descs[0].shape):
        raise GraphError(f"{node.type} {node.name!r}: segment_ids give {count} segments, the graph says "
                         f"{node.output_descs[0].shape[0]}")
    out = np.zeros(node.output_descs[0].shape, x.dtype)
    with np.errstate(all="ignore"):
        if node.type == "SegmentSum":
            np.add.at(out, ids, x)  # in index order, as TF's kernel adds a segment's rows
            return [out]
        sizes = np.bincount(ids, minlength=count)
        single = sizes[ids] == 1
        out[ids[single]] = x[single]  # copied, as TF copies a segment of one row
        longer = ~single
        rows = x[longer].reshape(int(longer.sum()), math.prod(x.shape[1:]))
        is_float = x.dtype.kind in "fV"
        start = -np.inf if is_float else _extreme(x.dtype, False)  # Eigen's MaxReducer: -inf, or the lowest int
        folded = np.full((count, rows.shape[1]), start, x.dtype)
        packed = 8 * (rows.shape[1] // 8) if is_float else rows.shape[1]
        # Eigen reduces whole packets of 8 columns with pmax (acc < row ? row : acc: a NaN row is passed over) and
        # the columns after them one by one with scalar max (row < acc ? acc : row: a NaN row is taken).
        fold_in_order(folded[:, :packed], ids[longer], rows[:, :packed], lambda row, acc: np.where(acc < row, row, acc))
        fold_in_order(folded[:, packed:], ids[longer], rows[:, packed:], lambda row, acc: np.where(row < acc, acc, row))
        out[sizes > 1] = folded[sizes > 1].reshape(int((sizes > 1).sum()), *x.shape[1:])
    return [out]


EXECUTORS = {"SegmentSum": _sorted, "SegmentMax": _sorted, "UnsortedSegmentMax": _unsorted,
             "UnsortedSegmentMin": _unsorted, "UnsortedSegmentProd": _unsorted}
