"""The scatter family's TF -> GE mappings (prototypes: graph_ir/opset/scatter.py): tf.tensor_scatter_nd_add, _sub,
_max and _min onto the GE ops of the same names, inputs by position; XLA's DynamicUpdateSlice (keras.ops.slice_update,
Swin's shifted windows), which CANN has no REG_OP for, as a Pad of the update selected into the input."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.ops.common import first, maps_to, same


@maps_to("SelectV2")
def _dynamic_update_slice(ctx, node, inputs):
    """XlaDynamicUpdateSlice(input, update, indices) with indices known when lowering: the start clamped into the
    input as XLA clamps it (0 <= start <= input dim - update dim), the update padded with zeros to the input's shape
    (GE Pad) and chosen where a Const mask of the window is true (GE SelectV2): the input elsewhere, bit for bit."""
    x, update, starts = inputs
    value = ctx.value(starts)
    where = f"TF XlaDynamicUpdateSlice {node.name!r}"
    if value is None:
        raise LoweringError(f"{where}: its start indices are computed in the step; graph_ir lowers them only when "
                            "they are known when lowering (GE has no DynamicUpdateSlice)")
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


LOWERINGS = {**{t: same(t) for t in ("TensorScatterAdd", "TensorScatterSub", "TensorScatterMax", "TensorScatterMin")},
             "XlaDynamicUpdateSlice": _dynamic_update_slice}
