"""The array family's TF -> GE mappings (prototypes: graph_ir/opset/array.py). Shape, ShapeN, Size and Rank become
Consts of the static shapes directly (GE would fold them too; and their REG_OPs take no bfloat16, though a shape of a
bfloat16 tensor is well defined), and so does whatever shape arithmetic follows them (graph_ir/lowering/context.py)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graph_ir.errors import LoweringError
from graph_ir.lowering.ops import dynamic_slice
from graph_ir.lowering.ops.common import count, maps_to, same, same_bool_as_bytes, tf_attr


def _shapes(of: Callable) -> Callable:
    @maps_to("Const")
    def lower(ctx, node, inputs):
        dtype = tf_attr(node, "out_type").numpy if "out_type" in node.attr else np.int32
        values = of(inputs)
        return [ctx.const(np.asarray(v, dtype), f"output_{k}" if k else "") for k, v in enumerate(values)]

    return lower


@maps_to("ExpandDims")
def _expand_dims(ctx, node, inputs):
    """GE's ExpandDims takes no bfloat16 (its REG_OP's list): a bfloat16 x becomes a Reshape to the static shape with
    the new dim (GE's Reshape takes every type), which is the same tensor."""
    x, axis = inputs
    at = ctx.value(axis)
    if x.dtype.name != "bfloat16" or at is None or np.size(at) != 1:
        return ctx.add("ExpandDims", [x, axis])  # (a computed or bad axis is refused there, naming the node)
    rank = len(x.shape) + 1
    position = int(np.reshape(at, -1)[0])
    if not -rank <= position < rank:
        raise LoweringError(f"TF ExpandDims {node.name!r}: axis {position} is out of range for rank {rank}")
    shape = list(x.shape)
    shape.insert(position % rank, 1)
    return ctx.add("Reshape", [x, ctx.const(np.asarray(shape, np.int64), "shape")])


_MASKS = {f"{m}_mask": f"{m}_mask" for m in ("begin", "end", "ellipsis", "new_axis", "shrink_axis")}

LOWERINGS = {
    "Shape": _shapes(lambda inputs: [list(inputs[0].shape)]),
    "ShapeN": _shapes(lambda inputs: [list(h.shape) for h in inputs]),
    "Size": _shapes(lambda inputs: [inputs[0].desc.num_elements]),
    "Rank": _shapes(lambda inputs: [len(inputs[0].shape)]),
    "BroadcastGradientArgs": same("BroadcastGradientArgs"),
    "BroadcastArgs": same("BroadcastArgs"),
    "Reshape": same("Reshape"),
    "ExpandDims": _expand_dims,
    "Squeeze": same("Squeeze", axis="squeeze_dims"),
    "Tile": same_bool_as_bytes("Tile"),
    "Transpose": same_bool_as_bytes("Transpose"),
    "BroadcastTo": same("BroadcastTo"),
    "Range": same("Range"),
    "Fill": same("Fill"),
    "ZerosLike": same("ZerosLike"),
    "OnesLike": same("OnesLike"),
    "Empty": same("Empty", dtype="dtype", init="init"),
    "ConcatV2": same("ConcatV2", N=count),
    "Pack": same("Pack", axis="axis", N=count),
    "GatherV2": same_bool_as_bytes("GatherV2", batch_dims="batch_dims"),
    "StridedSlice": dynamic_slice.strided_slice,
    "UnsortedSegmentSum": same("UnsortedSegmentSum"),
}
