"""The math family's TF -> GE mappings (prototypes: graph_ir/opset/math.py), as Ascend's TF adapter maps them:
elementwise ops onto the GE op of the same name (Exp and Log with CANN's base/scale/shift), the reductions Sum, Mean,
Prod, Max and Min onto ReduceSum, ReduceMean, ReduceProd, ReduceMax and ReduceMin, AddN onto AddN, Cast onto Cast
(dst_type from DstT). Relu and Round in bfloat16 (GE's declare none) run in float32 between Casts, bitwise TF's
bfloat16 results (a max, and an integer below 2^8 or a bfloat16 already integral, are bfloat16 values), and so do
Maximum, Minimum, Sign and Floor; Erf and Erfc (gelu's) too, as TF's bfloat16 kernels compute them: the float32
function rounded once to bfloat16. bfloat16 SquaredDifference lowers onto Sub and Square, TF's two roundings. AddV2 in
bfloat16 (GE's AddV2 declares none, GE's Add does) lowers onto Add: the same sum, correctly rounded either way."""

from __future__ import annotations

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.ops.activation import _output, in_float32
from graph_ir.lowering.ops.common import count, maps_to, same, same_bool_as_bytes

_EXP_LOG = {"base": lambda node: -1.0, "scale": lambda node: 1.0, "shift": lambda node: 0.0}
_SAME_NAME = ("Add", "Sub", "Mul", "RealDiv", "Pow", "FloorMod", "FloorDiv", "DivNoNan",
              "Cos", "Sin", "Sqrt", "Rsqrt", "Square", "Neg", "Abs",
              "Sigmoid", "Tanh", "ReluGrad", "SigmoidGrad", "TanhGrad", "RsqrtGrad", "Less",
              "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual", "Select", "SqrtGrad",
              "L2Loss")


@maps_to("AddV2")
def _add_v2(ctx, node, inputs):
    """AddV2, or Add where the inputs are bfloat16 (which GE's Add declares and its AddV2 does not)."""
    return ctx.add("Add" if inputs[0].dtype.name == "bfloat16" else "AddV2", inputs)



@maps_to("SquaredDifference")
def _squared_difference(ctx, node, inputs):
    """SquaredDifference; in bfloat16 (GE's declares none) Sub then Square, both bfloat16 GE ops: TF's bfloat16
    functor (abs2(x1 - x2)) rounds the difference to bfloat16 and then its square, as these two do."""
    if inputs[0].dtype.name != "bfloat16":
        return ctx.add("SquaredDifference", inputs)
    return ctx.add("Square", [_output(ctx.add("Sub", inputs, suffix="difference"))])


_round_in_float32 = in_float32("Round")


@maps_to("Round")
def _round(ctx, node, inputs):
    """Round, bfloat16 in float32 between Casts; integer Round is refused: TF's CPU kernel returns 0 for every
    integer (measured, tf.raw_ops.Round on int32 and int64) where GE's Round returns x, and tf.round never emits it
    (it returns an integer tensor as it is)."""
    if inputs[0].dtype.name.startswith(("int", "uint")):
        raise LoweringError(f"cannot lower TF Round {node.name!r}: on {inputs[0].dtype.name} TF's CPU kernel returns 0 "
                            "for every element where GE's Round returns x; tf.round (which returns an integer tensor "
                            "unchanged) lowers")
    return _round_in_float32(ctx, node, inputs)


LOWERINGS = {
    **{t: same(t) for t in _SAME_NAME},
    "AddV2": _add_v2,
    "Relu": in_float32("Relu"),
    "Round": _round,
    "SquaredDifference": _squared_difference,
    # No bfloat16 in GE's REG_OPs; a max, min, sign or floor of bfloat16 values is one, so float32 is exact.
    **{t: in_float32(t) for t in ("Maximum", "Minimum", "Sign", "Floor")},
    "Erf": in_float32("Erf"),
    "Erfc": in_float32("Erfc"),
    "SelectV2": same_bool_as_bytes("SelectV2", (1, 2)),  # bool then/else as uint8: GE's SelectV2 declares no bool
    "Exp": same("Exp", **_EXP_LOG),
    "Log": same("Log", **_EXP_LOG),
    "AddN": same("AddN", N=count),
    "Cast": same("Cast", dst_type="DstT"),
    **{tf: same(ge, keep_dims="keep_dims") for tf, ge in (("Sum", "ReduceSum"), ("Mean", "ReduceMean"),
                                                          ("Prod", "ReduceProd"), ("Max", "ReduceMax"),
                                                          ("Min", "ReduceMin"))},
}
