"""The math family's TF -> GE mappings (prototypes: graph_ir/opset/math.py), as Ascend's TF adapter maps them:
elementwise ops onto the GE op of the same name (Exp and Log with CANN's base/scale/shift), the reductions Sum, Mean,
Prod and Max onto ReduceSum, ReduceMean, ReduceProd and ReduceMax, AddN onto AddN, Cast onto Cast (dst_type from DstT).
Relu in bfloat16 (GE's Relu declares none) runs in float32 between Casts, bitwise TF's bfloat16 Relu."""

from __future__ import annotations

from graph_ir.lowering.ops.activation import in_float32
from graph_ir.lowering.ops.common import count, same, same_bool_as_bytes

_EXP_LOG = {"base": lambda node: -1.0, "scale": lambda node: 1.0, "shift": lambda node: 0.0}
_SAME_NAME = ("Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Pow", "FloorMod", "FloorDiv", "DivNoNan",
              "SquaredDifference", "Cos", "Sin", "Sqrt", "Rsqrt", "Square", "Neg", "Abs", "Sign", "Floor",
              "Sigmoid", "Tanh", "Erf", "Erfc", "ReluGrad", "SigmoidGrad", "TanhGrad", "RsqrtGrad", "Less",
              "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual", "Select")

LOWERINGS = {
    **{t: same(t) for t in _SAME_NAME},
    "Relu": in_float32("Relu"),
    "SelectV2": same_bool_as_bytes("SelectV2", (1, 2)),  # bool then/else as uint8: GE's SelectV2 declares no bool
    "Exp": same("Exp", **_EXP_LOG),
    "Log": same("Log", **_EXP_LOG),
    "AddN": same("AddN", N=count),
    "Cast": same("Cast", dst_type="DstT"),
    **{tf: same(ge, keep_dims="keep_dims") for tf, ge in (("Sum", "ReduceSum"), ("Mean", "ReduceMean"),
                                                          ("Prod", "ReduceProd"), ("Max", "ReduceMax"))},
}
