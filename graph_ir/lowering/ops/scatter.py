"""The scatter family's TF -> GE mappings (prototypes: graph_ir/opset/scatter.py): tf.tensor_scatter_nd_add, _sub,
_max and _min onto the GE ops of the same names, inputs by position; XLA's DynamicUpdateSlice (keras.ops.slice_update,
Swin's shifted windows), which CANN has no REG_OP for, as a Pad of the update selected into the input (start indices
known when lowering) or as slice_update.window at starts clamped in the graph (computed in the step)."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.ops.common import first, maps_to, same
from graph_ir.lowering.ops.slice_update import window


@maps_to("SelectV2")
def _dynamic_update_slice(ctx, node, inputs):
    """XlaDynamicUpdateSlice(input, update, indices) (computed indices: _computed_start); known: the start clamped into the
    input as XLA clamps it (0 <= start <= input dim - update dim), the update padded with zeros to the input's shape
    (GE Pad) and chosen where a Const mask of the window is true (GE SelectV2): the input elsewhere, bit for bit."""
    x, update, starts = inputs
    value = ctx.value(starts)
    where = f"TF XlaDynamicUpdateSlice {node.name!r}"
    if value is None:
        return _computed_start(ctx, node, x, update, starts)
    value = np.asarray(value).reshape(-1)
    if len(update.shape) != len(x.shape) or value.size != len(x.shape) or \
            any(u > d for u, d in zip(update.shape, x.shape)):
        raise LoweringError(f"{where}: update {list(update.shape)} with {value.size} start indices does not fit "
                            f"input {list(x.shape)}")
    start = [min(max(int(s), 0), d - u) for s, d, u in zip(value, x.shape, update.shape)]
    pads = np.array([[s, d - u - s] for s, d, u in zip(start, x.shape, update.shape)], np.int64).reshape(-1, 2)
    padded = first(ctx.add("Pad", [update, ctx.const(pads, "paddings")], suffix="padded"))
    mask = np.zeros(x.shape, bool)
    mask[tuple(slice(s, s + u) for s, u in zip(start, update.shape))] = True
    return ctx.add("SelectV2", [ctx.const(mask, "window"), padded, x])


def _computed_start(ctx, node, x, update, starts):
    """XlaDynamicUpdateSlice with start indices computed in the step: the start clamped into the input in the
    graph, as XLA clamps it (GE Maximum with 0, Minimum with input dim - update dim), then the update written
    there (slice_update.window: StridedSliceGrad and SelectV2, bit for bit). Clamped, the window always fits."""
    if len(update.shape) != len(x.shape) or starts.shape not in ((len(x.shape),), ()) or \
            any(u > d for u, d in zip(update.shape, x.shape)):
        raise LoweringError(f"TF XlaDynamicUpdateSlice {node.name!r}: update {list(update.shape)} with start indices "
                            f"of shape {list(starts.shape)} does not fit input {list(x.shape)}")
    dtype = starts.dtype.numpy
    low = first(ctx.add("Maximum", [starts, ctx.const(np.zeros(len(x.shape), dtype), "low")], suffix="at_least_0"))
    room = np.asarray([d - u for d, u in zip(x.shape, update.shape)], dtype)
    begin = first(ctx.add("Minimum", [low, ctx.const(room, "room")], suffix="start"))
    end = first(ctx.add("AddV2", [begin, ctx.const(np.asarray(update.shape, dtype), "size")], suffix="end"))
    return window(ctx, x, begin, end, ctx.const(np.ones(len(x.shape), dtype), "strides"), update, {})


LOWERINGS = {**{t: same(t) for t in ("TensorScatterAdd", "TensorScatterSub", "TensorScatterMax", "TensorScatterMin")},
             "XlaDynamicUpdateSlice": _dynamic_update_slice}
