"""The array family's TF -> GE mappings (prototypes: graph_ir/opset/array.py). Shape, ShapeN, Size and Rank become
Consts of the static shapes directly (GE would fold them too; and their REG_OPs take no bfloat16, though a shape of a
bfloat16 tensor is well defined), and so does whatever shape arithmetic follows them (graph_ir/lowering/context.py)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.ops import dynamic_slice
from graph_ir.lowering.ops.common import count, maps_to, same, same_bool_as_bytes, tf_attr


def _shapes(of: Callable, ge_type: str | None = None) -> Callable:
    @maps_to("Const")
    def lower(ctx, node, inputs):
        dtype = tf_attr(node, "out_type").numpy if "out_type" in node.attr else np.int32
        if ge_type is not None and ctx.probe is not None:  # dims may be known only at run time: a GE node
            return ctx.add(ge_type, [_shape_source(ctx, h, k) for k, h in enumerate(inputs)],
                           {"dtype": 9 if np.dtype(dtype) == np.int64 else 3})  # ge::DT_INT64, DT_INT32
        values = of(inputs)
        return [ctx.const(np.asarray(v, dtype), f"output_{k}" if k else "") for k, v in enumerate(values)]

    return lower


def _shape_source(ctx, h, k: int):
    """What GE's Shape, ShapeN or Size reads for `h`: itself, or for bfloat16 (which their REG_OPs do not take) its
    bits as int16, a view of the same shape."""
    if h.dtype.name != "bfloat16":
        return h
    return ctx.add("Bitcast", [h], {"type": "int16"}, suffix=f"bits_{k}").output(0)


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


@maps_to("GatherV2")
def _dynamic_stitch(ctx, node, inputs):
    """TF's DynamicStitch (out[indices[k][i]] = data[k][i], a later k winning: tensorflow/core/kernels/
    dynamic_stitch_op.cc) where the indices are known when lowering, as in the gradients of reductions over unknown
    dims (TF's reduced_shape): a ConcatV2 of the data, then a GatherV2 of the positions each output reads. GE's
    DynamicStitch REG_OP has two dynamic inputs, which graph_ir's IR does not hold."""
    n = len(inputs) // 2
    indices = [ctx.value(h) for h in inputs[:n]]
    if any(i is None for i in indices):
        raise LoweringError(f"TF DynamicStitch {node.name!r}: its indices are computed from the step's data; only "
                            "indices known when lowering (shape plumbing) are lowered")
    source: dict[int, int] = {}  # output position -> position in the concatenated data
    offset = 0
    for index in indices:
        for k, position in enumerate(np.asarray(index).reshape(-1)):
            if position < 0:
                raise LoweringError(f"TF DynamicStitch {node.name!r}: index {position} is negative")
            source[int(position)] = offset + k
        offset += int(np.size(index))
    size = max(source, default=-1) + 1
    if len(source) != size:
        raise LoweringError(f"TF DynamicStitch {node.name!r}: its indices leave output positions unset (TF leaves "
                            "them uninitialized)")
    rows = []
    for k, (index, data) in enumerate(zip(indices, inputs[n:])):
        tail = data.shape[np.ndim(index):]
        rows.append(ctx.add("Reshape", [data, ctx.const(np.asarray([np.size(index), *tail], np.int64), f"rows_{k}")],
                            suffix=f"rows_{k}").output(0))
    data = rows[0] if n == 1 else ctx.add("ConcatV2", [*rows, ctx.const(np.int32(0), "axis")], {"N": n},
                                          suffix="data").output(0)
    order = ctx.const(np.asarray([source[j] for j in range(size)], np.int32), "order")
    return ctx.add("GatherV2", [data, order, ctx.const(np.int32(0), "gather_axis")])


_MASKS = {f"{m}_mask": f"{m}_mask" for m in ("begin", "end", "ellipsis", "new_axis", "shrink_axis")}

LOWERINGS = {
    "Shape": _shapes(lambda inputs: [list(inputs[0].shape)], "Shape"),
    "ShapeN": _shapes(lambda inputs: [list(h.shape) for h in inputs], "ShapeN"),
    "Size": _shapes(lambda inputs: [inputs[0].desc.num_elements], "Size"),
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
    "DynamicStitch": _dynamic_stitch,
}
