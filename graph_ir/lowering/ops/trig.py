"""The trigonometric family's TF -> GE mappings (prototypes: graph_ir/opset/trig.py), as Ascend's TF adapter maps
them: each TF op onto the GE op of the same name, inputs by position (TF's Atan2(y, x) is GE's Atan2(x1, x2)).
bfloat16: GE's Acos, Asin, Tan and Atan2 declare none, so a bfloat16 input runs in float32 between Casts, which is
what TF's bfloat16 kernels compute (the float32 function of the widened input, rounded once to bfloat16)."""

from __future__ import annotations

from graph_ir.lowering.ops.activation import in_float32
from graph_ir.lowering.ops.common import same

LOWERINGS = {
    **{t: same(t) for t in ("Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh")},
    **{t: in_float32(t) for t in ("Acos", "Asin", "Tan", "Atan2")},
}
