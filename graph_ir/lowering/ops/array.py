"""The array family's TF -> GE mappings (prototypes: graph_ir/opset/array.py). Shape, ShapeN and Size fold into
Consts (graph_ir's shapes are static), and so does whatever shape arithmetic follows them (graph_ir/lowering/
context.py); Rank is its Const directly."""

from __future__ import annotations

import numpy as np

from graph_ir.lowering.ops.common import count, same, tf_attr


def _out_type(node) -> int:
    return tf_attr(node, "out_type").ge  # GE's Shape ops carry the ge::DataType as an int


def _rank(ctx, node, inputs):
    return [ctx.const(np.int32(len(inputs[0].shape)), "rank")]


_rank.ge_type = "Const"


_MASKS = {f"{m}_mask": f"{m}_mask" for m in ("begin", "end", "ellipsis", "new_axis", "shrink_axis")}

LOWERINGS = {
    "Shape": same("Shape", dtype=_out_type),
    "ShapeN": same("ShapeN", dtype=_out_type),
    "Size": same("Size", dtype=_out_type),
    "Rank": _rank,
    "BroadcastGradientArgs": same("BroadcastGradientArgs"),
    "Reshape": same("Reshape"),
    "ExpandDims": same("ExpandDims"),
    "Squeeze": same("Squeeze", axis="squeeze_dims"),
    "Tile": same("Tile"),
    "Transpose": same("Transpose"),
    "BroadcastTo": same("BroadcastTo"),
    "Range": same("Range"),
    "Fill": same("Fill"),
    "ZerosLike": same("ZerosLike"),
    "OnesLike": same("OnesLike"),
    "ConcatV2": same("ConcatV2", N=count),
    "Pack": same("Pack", axis="axis", N=count),
    "GatherV2": same("GatherV2", batch_dims="batch_dims"),
    "StridedSlice": same("StridedSlice", **_MASKS),
    "UnsortedSegmentSum": same("UnsortedSegmentSum"),
}
