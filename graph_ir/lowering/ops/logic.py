"""The logic family's TF -> GE mappings (prototypes: graph_ir/opset/logic.py), as Ascend's TF adapter maps them
(CANN's framework/tf_plugin): ArgMax onto ArgMaxV2 and ArgMin onto ArgMin (TF's output_type as GE's dtype), All and
Any onto ReduceAll and ReduceAny, the others onto the GE op of the same name with their attributes (Bitcast's type,
OneHot's axis, MatrixDiagPartV3's align)."""

from __future__ import annotations

from graph_ir.lowering.ops.common import same

_SAME_NAME = ("LogicalAnd", "LogicalOr", "LogicalNot", "BitwiseAnd", "ClipByValue", "IsFinite", "IsNan", "IsInf",
              "Ceil", "InTopKV2")

LOWERINGS = {
    **{t: same(t) for t in _SAME_NAME},
    "Bitcast": same("Bitcast", type="type"),
    "ArgMax": same("ArgMaxV2", dtype="output_type"),
    "ArgMin": same("ArgMin", dtype="output_type"),
    "OneHot": same("OneHot", axis="axis"),
    "All": same("ReduceAll", keep_dims="keep_dims"),
    "Any": same("ReduceAny", keep_dims="keep_dims"),
    "MatrixDiagPartV3": same("MatrixDiagPartV3", align="align"),
}
