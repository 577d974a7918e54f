"""TF's StridedSlice with a begin (and end) computed in the step but a static result shape: the micro-batch slice
`x[i * mb:(i + 1) * mb]` and the row `x[i]` inside a tf.range loop. GE's graphs here have static shapes, so the
lowering must know each slice's size: it is end - begin whenever both are the same linear function of the computed
values up to a constant (found by `linear`, over Const, Pack, Add/AddV2, Sub, Mul by a constant, Identity and integer
Casts), 1 for a shrunk axis (`x[i]`), and the whole dim for a dim not sliced. Such a StridedSlice becomes GE Slice
(x, offsets, size) with the offsets computed in the graph (its REG_OP takes them as a tensor), then a Reshape that
drops the shrunk axes.

At run time Slice refuses an offset out of range (offsets[k] < 0 or offsets[k] + size[k] > dim k) with an error
naming the node, before writing anything of its output. Where TF's StridedSlice would clamp such a range, its
result would have another shape than the graph's static one, so refusing is the only faithful answer; a negative
computed begin (which TF counts from the end) is refused too rather than wrapped. Within range, Slice reads exactly
the elements TF's StridedSlice reads. Strides other than 1, ellipsis and new-axis masks with a computed begin, and a
size that is not a constant are refused when lowering, naming the node.

Its gradient, TF's StridedSliceGrad with the same computed begin and end (`action_probs[0, action]` in keras.io's
actor-critic step), is GE StridedSliceGrad with begin and end as computed inputs: its output's shape is the Const
`shape` and dy's shape is static, so nothing needs sizing. Its executor follows TF's kernel (a negative index counts
from the end, a range is clamped) and refuses, naming the node, before writing anything, a range whose slice has not
dy's shape (an index out of range, a range clamped short), as TF's kernel refuses it. In a step the forward Slice runs
first and refuses a negative or out-of-range begin itself.

Slice updates at computed positions: graph_ir/lowering/ops/slice_update.py."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import LoweringError
from graph_ir.ir.nodes import Handle
from graph_ir.lowering.ops.common import first, maps_to, same_bool_as_bytes, tf_attr
from graph_ir.opset.linear_forms import CONSTANT as _CONSTANT
from graph_ir.opset.linear_forms import Form, difference, linear

_MASKS = {f"{m}_mask": f"{m}_mask" for m in ("begin", "end", "ellipsis", "new_axis", "shrink_axis")}
_STATIC = same_bool_as_bytes("StridedSlice", **_MASKS)


@maps_to("StridedSlice")
def strided_slice(ctx, node, inputs):
    """StridedSlice: GE StridedSlice when begin, end and strides are Consts, else GE Slice (module docstring)."""
    if all(h.node.type == "Const" for h in inputs[1:]):
        return _STATIC(ctx, node, inputs)
    x, begin = inputs[0], inputs[1]
    offsets, sizes, shape = static_ranges(node, x.shape, *inputs[1:])
    return _slice(ctx, x, begin, offsets, sizes, shape)


@maps_to("StridedSliceGrad")
def strided_slice_grad(ctx, node, inputs):
    """StridedSliceGrad (shape, begin, end, strides, dy): GE StridedSliceGrad with the same inputs, begin and end
    computed in the step or not (its REG_OP takes them as tensors; the output's shape is the Const `shape`, dy's is
    static). Where the forward's rule (static_ranges) sizes a computed range, its slice must have dy's shape when
    lowering; where it cannot (begin and end popped off two TensorLists in a loop's gradient), the executor checks
    the slice against dy's shape at run time, as TF's kernel does, and refuses a mismatch naming the node."""
    masks = {m: int(tf_attr(node, m, 0)) for m in _MASKS}
    if not all(h.node.type == "Const" for h in inputs[1:4]):
        shape, dy = inputs[0], inputs[4]
        if shape.node.type != "Const":
            raise LoweringError(f"TF StridedSliceGrad {node.name!r}: its input shape is computed in the step; GE "
                                "graphs here have static shapes")
        dims = [int(d) for d in np.asarray(shape.node.attrs["value"]).reshape(-1)]
        try:
            sliced = static_ranges(node, dims, *inputs[1:4])[2]
        except LoweringError:  # not of one linear form: checked at run time
            sliced = list(dy.shape)
        if list(dy.shape) != sliced:
            raise LoweringError(f"TF StridedSliceGrad {node.name!r}: dy has shape {list(dy.shape)}, but the slice "
                                f"of {dims} its begin and end take has shape {sliced}")
    return ctx.add("StridedSliceGrad", inputs, masks)


def static_ranges(node, dims, begin: Handle, end: Handle, strides: Handle) -> tuple[list[Form], list[int], list[int]]:
    """TF StridedSlice's range over a tensor of shape `dims` with a computed begin or end, one dim at a time: the
    offsets (linear forms), the sizes, and the result's shape (the shrunk axes dropped). Refused (LoweringError
    naming the node) where a size is not a constant (module docstring)."""
    masks = {m: int(tf_attr(node, m, 0)) for m in _MASKS}

    def refuse(why: str) -> LoweringError:
        return LoweringError(f"TF {node.op} {node.name!r}: its begin or end is computed in the step, {why}; GE "
                             "graphs here have static shapes, so the slice's size must be known when lowering")

    if masks["ellipsis_mask"] or masks["new_axis_mask"]:
        raise refuse("and it uses an ellipsis or a new axis (lowered only with a constant begin and end)")
    if strides.node.type != "Const" or np.any(np.asarray(strides.node.attrs["value"]) != 1):
        raise refuse("and its strides are not all 1")
    b_forms, e_forms = linear(begin), linear(end)
    if not len(b_forms) == len(e_forms) <= len(dims):
        raise refuse(f"and begin and end do not fit a shape {list(dims)}")
    offsets, sizes, shape = [], [], []
    for k, dim in enumerate(dims):
        bit = 1 << k
        if k >= len(b_forms):
            offsets.append({_CONSTANT: 0})
            sizes.append(dim)
            shape.append(dim)
            continue
        b = {_CONSTANT: 0} if masks["begin_mask"] & bit else b_forms[k]
        e = {_CONSTANT: dim} if masks["end_mask"] & bit else e_forms[k]
        if masks["shrink_axis_mask"] & bit:
            b, e = b_forms[k], {**b_forms[k], _CONSTANT: b_forms[k].get(_CONSTANT, 0) + 1}
        if set(b) <= {_CONSTANT} and set(e) <= {_CONSTANT}:  # this dim's range is constant: TF's own clamping
            start, stop, _ = slice(b[_CONSTANT], e[_CONSTANT]).indices(dim)
            if masks["shrink_axis_mask"] & bit:
                if not -dim <= b[_CONSTANT] < dim:
                    raise refuse(f"and its index {b[_CONSTANT]} of dim {k} is out of range [{-dim}, {dim})")
                start, stop = b[_CONSTANT] % dim, b[_CONSTANT] % dim + 1
            b, size = {_CONSTANT: start}, max(stop - start, 0)
        else:
            size = difference(e, b)
            if size is None:
                raise refuse(f"and the size of dim {k} (end - begin) is not a constant")
            size = max(size, 0)
        offsets.append(b)
        sizes.append(size)
        if not masks["shrink_axis_mask"] & bit:
            shape.append(size)
    return offsets, sizes, shape


def _slice(ctx, x: Handle, begin: Handle, offsets: list[Form], sizes: list[int],
           shape: list[int]):
    """Slice(x, offsets, sizes) then a Reshape to `shape`: each computed offset is read off `begin` (its component
    is the same form), a constant one is a Const."""
    dtype = begin.dtype.numpy
    parts = []
    for k, form in enumerate(offsets):
        if set(form) <= {_CONSTANT}:
            parts.append(ctx.const(np.asarray(form.get(_CONSTANT, 0), dtype), f"offset_{k}"))
            continue
        index = k  # a computed offset is begin's own component k (begin_mask and shrinking keep it)
        stop = ctx.const(np.asarray([index + 1], dtype), f"offset_{k}_stop")
        start, one = ctx.const(np.asarray([index], dtype), f"offset_{k}_start"), ctx.const(np.asarray([1], dtype),
                                                                                           f"offset_{k}_stride")
        parts.append(first(ctx.add("StridedSlice", [begin, start, stop, one],
                                   {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0,
                                    "shrink_axis_mask": 1}, suffix=f"offset_{k}")))
    packed = first(ctx.add("Pack", parts, {"axis": 0, "N": len(parts)}, suffix="offsets"))
    size = ctx.const(np.asarray(sizes, dtype), "size")
    moved = x if x.dtype.name != "bool" else first(ctx.add("Cast", [x], {"dst_type": "uint8"}, suffix="uint8"))
    y = first(ctx.add("Slice", [moved, packed, size], suffix="slice"))
    if x.dtype.name == "bool":
        y = first(ctx.add("Cast", [y], {"dst_type": "bool"}, suffix="bool"))
    return ctx.add("Reshape", [y, ctx.const(np.asarray(shape, np.int64), "shape")])

