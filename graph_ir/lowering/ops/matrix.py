"""The matrix family's TF -> GE mappings (prototypes: graph_ir/opset/matrix.py). MatrixBandPart (bfloat16 between
Casts to float32) and the V3 diagonal ops map onto the GE ops of the same name, inputs by position (their k,
num_rows and num_cols must be Consts: the verifier refuses them otherwise, naming the node and input, since the
output shapes depend on their values). TopKV2 takes TF's `sorted` (an int64 index_type through a Cast: GE's TopKV2
gives int32 indices; a k of int16/int64 is cast to GE's int32). Roll's shift and axis inputs become GE Roll's
`shifts` and `dims` attributes (one per axis: TF's running sums), so they must be constants when lowered; the
dtypes GE's Roll lacks roll as one it has."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import LoweringError
from graph_ir.ir.nodes import Handle, Node
from graph_ir.lowering.ops.activation import in_float32
from graph_ir.lowering.ops.common import maps_to, same, tf_attr


def _first(result) -> Handle:
    return result.output(0) if isinstance(result, Node) else result[0]


@maps_to("TopKV2")
def _top_k(ctx, node, inputs):
    x, k = inputs
    if k.dtype.name != "int32":  # TF's Tk may be int16 or int64; GE's k is int32 (a Const: the Cast folds)
        value = ctx.value(k)
        if value is not None and not np.all(np.abs(value.astype(np.int64)) < 2**31):
            raise LoweringError(f"lowering TF TopKV2 {node.name!r}: input 'k' is {value.tolist()}, beyond GE's int32 k")
        k = _first(ctx.add("Cast", [k], {"dst_type": "int32"}, suffix="k"))
    top = ctx.add("TopKV2", [x, k], {"sorted": bool(tf_attr(node, "sorted", True))})
    index_type = tf_attr(node, "index_type")
    if index_type is None or index_type.name == "int32":
        return top
    values, indices = (top.output(0), top.output(1)) if isinstance(top, Node) else top
    return [values, _first(ctx.add("Cast", [indices], {"dst_type": index_type.name}, suffix="indices"))]


def _attr_list(ctx, node, handle, what: str) -> list[int]:
    value = ctx.value(handle)
    if value is None:
        raise LoweringError(f"lowering TF Roll {node.name!r}: input {what!r} must be a constant when the step is "
                            f"lowered (GE's Roll takes it as an attribute), got {handle.node.type} "
                            f"{handle.node.name!r}")
    value = np.asarray(value)
    if value.ndim > 1:
        raise LoweringError(f"lowering TF Roll {node.name!r}: input {what!r} must be a scalar or a vector, got shape "
                            f"{list(value.shape)}")
    return [int(v) for v in value.reshape(-1)]


def _int32(v: int) -> int:
    """v wrapped to int32, as C++'s static_cast<int> does."""
    return (v + 2**31) % 2**32 - 2**31


@maps_to("Roll")
def _roll(ctx, node, inputs):
    """TF's kernel (roll_op.cc) reads each shift as an int (an int64 shift is truncated to 32 bits) and keeps, per
    axis, the running sum modulo the dimension; GE's Roll gets those per-axis sums, which roll the same way."""
    x, shift, axis = inputs
    shifts, dims = _attr_list(ctx, node, shift, "shift"), _attr_list(ctx, node, axis, "axis")
    rank = len(x.shape)
    if len(shifts) != len(dims) or any(not -rank <= d < rank for d in dims):
        raise LoweringError(f"lowering TF Roll {node.name!r}: shift {shifts} and axis {dims} must have the same "
                            f"length and name axes of rank {rank} (TF requires it)")
    total: dict[int, int] = {}
    for s, d in zip(shifts, dims):
        d %= rank
        total[d] = _int32(total.get(d, 0) + _int32(s)) % max(x.shape[d], 1)
    if not any(total.values()):  # nothing to roll: TF returns x
        return ctx.add("Identity", [x])
    attrs = {"shifts": list(total.values()), "dims": list(total)}
    through = _ROLL_THROUGH.get(x.dtype.name)
    if through is None:
        return ctx.add("Roll", [x], attrs)
    kind, wide = through  # a dtype GE's Roll does not declare, moved as one it does (exact either way)
    there = _first(ctx.add(kind, [x], {"type" if kind == "Bitcast" else "dst_type": wide}, suffix=wide))
    rolled = _first(ctx.add("Roll", [there], attrs, suffix="roll"))
    return ctx.add(kind, [rolled], {"type" if kind == "Bitcast" else "dst_type": x.dtype.name})


# GE's Roll (its REG_OP) takes f16 f32 bf16 int8 uint8 int32 uint32 int64: the others roll as one of those, their
# values cast there and back (bool, 16-bit integers) or their bits reinterpreted (float64, uint64).
_ROLL_THROUGH = {"bool": ("Cast", "uint8"), "int16": ("Cast", "int32"), "uint16": ("Cast", "int32"),
                 "float64": ("Bitcast", "int64"), "uint64": ("Bitcast", "int64")}


LOWERINGS = {
    "MatrixBandPart": in_float32("MatrixBandPart"),  # bfloat16 (not in its REG_OP) as float32: a selection, exact
    "MatrixDiagV3": same("MatrixDiagV3", align="align"),
    "MatrixDiagPartV3": same("MatrixDiagPartV3", align="align"),
    "MatrixSetDiagV3": same("MatrixSetDiagV3", align="align"),
    "TopKV2": _top_k,
    "Roll": _roll,
}
