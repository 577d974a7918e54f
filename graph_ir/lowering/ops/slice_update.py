"""Slice updates at positions computed in the step (issue 48), their size known when lowering:

- ResourceStridedSliceAssign (`var[i].assign(x)`, `var[i:i + 2].assign(x)`) is GE StridedSliceAssign on the Variable,
  begin, end and strides as inputs; its executor is TF's StridedSliceAssignOp (tensorflow/core/kernels/
  strided_slice_op.cc: negative indices from the end, ranges clamped, an empty slice writes nothing, another must
  have the value's shape, else the node is refused before anything is written).
- TensorStridedSliceUpdate (tf.experimental.numpy's slice updates) and XlaDynamicUpdateSlice at computed starts
  (keras.ops.slice_update: graph_ir/lowering/ops/scatter.py) are `window`: GE StridedSliceGrad spreads the update,
  and ones of its shape the window's mask, into the input's static shape; GE SelectV2 takes the update inside the
  window, the input elsewhere, bit for bit. StridedSliceGrad refuses, naming the node, a range whose slice has not
  the update's shape (TF's kernel refuses it too). TF writes nothing for an empty range: with strides 1 and no
  ellipsis or new axis, `_empty_range` computes TF's clamped range in the graph and, where it is empty, hands
  StridedSliceGrad a range that fits and selects the input whole; with other strides an empty computed range is
  refused (StridedSliceGrad's rule), the one difference from TF, and a refusal."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import LoweringError
from graph_ir.ir.nodes import Handle
from graph_ir.lowering.ops.common import first, maps_to, tf_attr
from graph_ir.opset.array import strided_slice_index

_MASKS = tuple(f"{m}_mask" for m in ("begin", "end", "ellipsis", "new_axis", "shrink_axis"))


def _masks(node) -> dict[str, int]:
    return {m: int(tf_attr(node, m, 0)) for m in _MASKS}


@maps_to("StridedSliceAssign")
def resource_strided_slice_assign(ctx, node, inputs):
    """ResourceStridedSliceAssign (ref, begin, end, strides, value): GE StridedSliceAssign on the Variable, begin,
    end and strides computed in the step or not, the masks as attributes (module docstring)."""
    if inputs[0].node.type != "Variable":
        raise LoweringError(f"TF {node.op} {node.name!r} writes {inputs[0].node.type} {inputs[0].node.name!r}, "
                            "which is not a lowered variable")
    written = ctx.add("StridedSliceAssign", inputs, _masks(node))
    ctx.stateful.append(written)
    return written


@maps_to("SelectV2")
def tensor_strided_slice_update(ctx, node, inputs):
    """TensorStridedSliceUpdate (input, begin, end, strides, value): input with value where StridedSlice reads.
    With begin, end and strides known when lowering, an empty slice is input itself, as in TF; computed, `window`
    (module docstring)."""
    x, begin, end, strides, value = inputs
    masks = _masks(node)
    known = [ctx.value(h) for h in (begin, end, strides)]
    if all(v is not None for v in known):
        index = strided_slice_index(node.op, node.name, len(x.shape), *known, masks)
        if not np.broadcast_to(np.zeros((), np.int8), x.shape)[index].size:  # a view: no memory
            return ctx.add("Identity", [x])
        return window(ctx, x, begin, end, strides, value, masks)
    guarded = _empty_range(ctx, x, begin, end, known[2], value, masks)
    if guarded is None:
        return window(ctx, x, begin, end, strides, value, masks)
    return window(ctx, x, *guarded[:2], strides, value, masks, empty=guarded[2])


def _empty_range(ctx, x: Handle, begin: Handle, end: Handle, strides, update: Handle,
                 masks: dict) -> tuple[Handle, Handle, Handle] | None:
    """(begin, end, empty): TF's range over x with strides 1 (a negative index plus the dim, then clamped into
    [0, dim]; begin_mask 0, end_mask the dim), `empty` whether a dim not shrunk is empty there, and begin and end
    replaced then, in those dims, by a range of the update's size (a shrunk index stays: StridedSliceGrad refuses it
    out of range, as TF does even when the range is empty). None where it does not apply (module docstring)."""
    n = begin.shape[0] if len(begin.shape) == 1 else -1
    if strides is None or np.any(np.asarray(strides) != 1) or masks["ellipsis_mask"] or masks["new_axis_mask"] or \
            not 0 < n <= len(x.shape):
        return None
    bit = [[(masks[m] >> k) & 1 for k in range(n)] for m in ("begin_mask", "end_mask", "shrink_axis_mask")]
    kept = [k for k in range(n) if not bit[2][k]]
    if len(update.shape) != len(kept) + len(x.shape) - n:
        return None
    size = dict(zip(kept, update.shape))
    if any(size[k] > x.shape[k] for k in kept):
        return None
    dtype = begin.dtype.numpy
    dims = ctx.const(np.asarray(x.shape[:n], dtype), "dims")
    zero = ctx.const(np.zeros(n, dtype), "zeros")

    def clamped(h: Handle, masked: list[int], fill: Handle, what: str) -> Handle:
        negative = first(ctx.add("Less", [h, zero], suffix=f"{what}_negative"))
        wrapped = first(ctx.add("SelectV2", [negative, first(ctx.add("AddV2", [h, dims], suffix=f"{what}_plus_dim")),
                                             h], suffix=f"{what}_wrapped"))
        inside = first(ctx.add("Minimum", [first(ctx.add("Maximum", [wrapped, zero], suffix=f"{what}_at_least_0")),
                                           dims], suffix=f"{what}_clamped"))
        return first(ctx.add("SelectV2", [ctx.const(np.asarray(masked, bool), f"{what}_mask"), fill, inside],
                             suffix=f"{what}_range"))

    low, high = clamped(begin, bit[0], zero, "begin"), clamped(end, bit[1], dims, "end")
    short = first(ctx.add("LessEqual", [high, low], suffix="empty_dims"))
    kept_dims = ctx.const(np.asarray([not s for s in bit[2]], bool), "kept_dims")
    short = first(ctx.add("LogicalAnd", [short, kept_dims], suffix="empty_kept_dims"))
    empty = first(ctx.add("ReduceAny", [short, ctx.const(np.asarray([0], np.int32), "axis")], {"keep_dims": False},
                          suffix="empty"))
    swap = first(ctx.add("LogicalAnd", [kept_dims, empty], suffix="swap"))
    safe_begin = [x.shape[k] - size[k] if bit[1][k] and k in size else 0 for k in range(n)]
    safe_end = [size.get(k, 1) for k in range(n)]
    begin = first(ctx.add("SelectV2", [swap, ctx.const(np.asarray(safe_begin, dtype), "safe_begin"), begin],
                          suffix="fitting_begin"))
    end = first(ctx.add("SelectV2", [swap, ctx.const(np.asarray(safe_end, dtype), "safe_end"), end],
                        suffix="fitting_end"))
    return begin, end, empty


def window(ctx, x: Handle, begin: Handle, end: Handle, strides: Handle, update: Handle, masks: dict,
           empty: Handle | None = None):
    """x with `update` where StridedSlice(begin, end, strides) reads, bit for bit (module docstring); x whole where
    the bool scalar `empty` is true."""
    dtype, boolean = begin.dtype.numpy, x.dtype.name == "bool"  # bool moves as uint8 (GE's BasicType has none)
    shape = ctx.const(np.asarray(x.shape, dtype), "shape")
    if boolean:
        x, update = (first(ctx.add("Cast", [h], {"dst_type": "uint8"}, suffix=f"{k}_uint8"))
                     for k, h in (("input", x), ("update", update)))
    spread = first(ctx.add("StridedSliceGrad", [shape, begin, end, strides, update], masks, suffix="spread"))
    ones = first(ctx.add("OnesLike", [update], suffix="ones"))  # computed: no Const of the update's size
    mask = first(ctx.add("StridedSliceGrad", [shape, begin, end, strides, ones], masks, suffix="window"))
    mask = first(ctx.add("Cast", [mask], {"dst_type": "bool"}, suffix="mask"))
    if empty is not None:
        mask = first(ctx.add("LogicalAnd", [mask, first(ctx.add("LogicalNot", [empty], suffix="not_empty"))],
                             suffix="mask_unless_empty"))
    if not boolean:
        return ctx.add("SelectV2", [mask, spread, x])
    chosen = first(ctx.add("SelectV2", [mask, spread, x], suffix="uint8"))
    return ctx.add("Cast", [chosen], {"dst_type": "bool"})
