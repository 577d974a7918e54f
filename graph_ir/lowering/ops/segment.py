"""The segment family's TF -> GE mappings (prototypes: graph_ir/opset/segment.py): tf.math.segment_sum / segment_max
and unsorted_segment_max / min / prod onto the GE ops of the same names, inputs by position.

SegmentMin and SegmentMean have no CANN REG_OP; with Const segment_ids (which GE's sorted segment ops need: the
output's length is the last id + 1) they lower onto ops that have one, giving TF's result bit for bit:
- SegmentMin of floats is -SegmentMax(-x): negation is exact and maps Eigen's MaxReducer onto its MinReducer compare
  for compare (the packets' and the scalar tail's NaN rules included); of integers (where -x overflows at the lowest
  value) UnsortedSegmentMin. An empty segment is 0, as TF gives it (a SelectV2 on the Const mask of empty segments:
  the negation would give -0.0, UnsortedSegmentMin the dtype's largest value).
- SegmentMean of floats is SegmentSum(x) / count: TF's MeanReducer sums the rows in SegmentSum's order and divides
  once by the count; an empty segment (count 0) is 0. Integer means (TF's truncating division) are refused."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.ops.common import first, maps_to, same
from graph_ir.opset.segment import sorted_segment_count


def _segment_sizes(ctx, node, x, ids) -> np.ndarray:
    """Each segment's row count, from the Const ids after TF's checks on sorted ids."""
    value = ctx.value(ids)
    if value is None:
        raise LoweringError(f"cannot lower TF {node.op} {node.name!r}: segment_ids must be known when lowering (a "
                            f"Const), got {ids.node.type} {ids.node.name!r}; the output's length is the last id + 1")
    value = np.asarray(value).astype(np.int64)
    count = sorted_segment_count(node.op, node.name, value, x.shape[0] if x.shape else -1)
    return np.bincount(value, minlength=count)


def _per_segment(sizes: np.ndarray, rank: int) -> np.ndarray:
    return sizes.reshape(-1, *([1] * (rank - 1)))


@maps_to("SegmentMax")
def _segment_min(ctx, node, inputs):
    x, ids = inputs
    sizes = _segment_sizes(ctx, node, x, ids)
    if x.dtype.name in ("float16", "bfloat16", "float32", "float64"):
        negated = first(ctx.add("Neg", [x], suffix="negated"))
        largest = first(ctx.add("SegmentMax", [negated, ids], suffix="largest_negated"))
        smallest = first(ctx.add("Neg", [largest], suffix="smallest"))
    else:
        segments = ctx.const(np.int32(sizes.size), "num_segments")
        smallest = first(ctx.add("UnsortedSegmentMin", [x, ids, segments], suffix="smallest"))
    empty = ctx.const(_per_segment(sizes == 0, len(x.shape)), "empty")
    return ctx.add("SelectV2", [empty, ctx.const(np.zeros((), x.dtype.numpy), "zero"), smallest])


@maps_to("SegmentSum")
def _segment_mean(ctx, node, inputs):
    x, ids = inputs
    if x.dtype.name not in ("float16", "bfloat16", "float32", "float64"):
        raise LoweringError(f"cannot lower TF SegmentMean {node.name!r} of {x.dtype.name}: an integer mean is TF's "
                            "truncating division, which no GE op here computes; take the mean of floats")
    sizes = _segment_sizes(ctx, node, x, ids)
    total = first(ctx.add("SegmentSum", [x, ids], suffix="sum"))
    counts = ctx.const(_per_segment(np.maximum(sizes, 1), len(x.shape)).astype(x.dtype.numpy), "count")
    return ctx.add("RealDiv", [total, counts])


LOWERINGS = {
    **{t: same(t) for t in ("SegmentSum", "SegmentMax", "UnsortedSegmentMax", "UnsortedSegmentMin",
                            "UnsortedSegmentProd")},
    "SegmentMin": _segment_min,
    "SegmentMean": _segment_mean,
}
