"""The segment family's GE prototypes (CANN REG_OPs, declared in third_party/cann/ge_reg_ops.txt): the sorted segment
reductions SegmentSum and SegmentMax (segment ids as a Const: the output's first dim is the last id + 1), and the
unsorted ones UnsortedSegmentMax, UnsortedSegmentMin and UnsortedSegmentProd (UnsortedSegmentSum is
graph_ir/opset/array.py's). Executors: graph_ir/executors/segment.py; TF mappings: graph_ir/lowering/ops/segment.py."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import INDICES, REALS, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import const_value
from graph_ir.opset.array import unsorted_segments


def sorted_segment_count(op_type: str, node: str, ids: np.ndarray, rows: int) -> int:
    """The segments of sorted `ids` (last id + 1), after TF's checks: a vector as long as x's first dim, ids
    non-negative and non-decreasing (TF's SegmentReductionOp refuses anything else)."""
    if ids.ndim != 1 or ids.size != rows:
        raise GraphError(f"{op_type} {node!r}: segment_ids must be a vector of x's first dim {rows}, got shape "
                         f"{list(ids.shape)}")
    if ids.size and (ids[0] < 0 or np.any(np.diff(ids) < 0)):
        raise GraphError(f"{op_type} {node!r}: segment_ids must be non-negative and sorted, got "
                         f"{ids.reshape(-1)[:8].tolist()}...")
    return int(ids[-1]) + 1 if ids.size else 0


def _sorted(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, ids = inputs
    if not x.shape:
        raise GraphError(f"{op.type} {node!r}: x must have rank >= 1, got a scalar")
    count = sorted_segment_count(op.type, node, const_value(op, node, ids, "segment_ids"), x.shape[0])
    return [TensorDesc("y", x.dtype, (count, *x.shape[1:]))]


_WHAT = {"Sum": "sum", "Max": "largest", "Min": "smallest", "Prod": "product"}
for _type in ("SegmentSum", "SegmentMax"):
    register(IrOp(_type, (IrInput("x", REALS), IrInput("segment_ids", INDICES)), (IrOutput("y", REALS),),
                  outputs_from="infer", infer=_sorted,
                  doc=f"y[i] = the {_WHAT[_type[7:]]} of the x rows whose sorted segment id is i (Const ids)."))
for _type in ("UnsortedSegmentMax", "UnsortedSegmentMin", "UnsortedSegmentProd"):
    register(IrOp(_type, (IrInput("x", REALS), IrInput("segment_ids", INDICES), IrInput("num_segments", INDICES)),
                  (IrOutput("y", REALS),), outputs_from="infer", infer=unsorted_segments,
                  doc=f"y[i] = the {_WHAT[_type[15:]]} of the x slices whose segment id is i (negative ids dropped, "
                      "ids >= num_segments refused, empty segments TF's identity)."))
