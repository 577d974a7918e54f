"""op_spec: the operators' specification, declared once and framework-free (standard library only).

- ``op_spec.POWER_SIGN`` and ``op_spec.FUSED_EMA_ADAM``: inputs, attributes, dtypes, defaults, ranges, the formula
  and the GE side (op_spec/operators.py); ``op_spec.MULTI_POWER_SIGN`` and ``op_spec.MULTI_FUSED_EMA_ADAM``, their
  multi-tensor forms over flat optimizer state;
- ``op_spec.checks``: the value rules as Python checks;
- ``op_spec.codegen``: the C++ registrations and attribute checks of the TF ops, generated at build time;
- ``op_spec.reference``: float64 NumPy references of the formulas (imports NumPy).
"""

from op_spec.operators import (
    ALL,
    ALL_MULTI,
    FUSED_EMA_ADAM,
    FUSED_EMA_ADAM_LR_DEFAULT,
    MULTI_FUSED_EMA_ADAM,
    MULTI_POWER_SIGN,
    POWER_SIGN,
)
from op_spec.signature import OP_PREFIX, Attr, GeSide, Input, MultiOpSignature, OpSignature, Rule

__all__ = ["ALL", "ALL_MULTI", "FUSED_EMA_ADAM", "FUSED_EMA_ADAM_LR_DEFAULT", "MULTI_FUSED_EMA_ADAM",
           "MULTI_POWER_SIGN", "OP_PREFIX", "POWER_SIGN", "Attr", "GeSide", "Input", "MultiOpSignature",
           "OpSignature", "Rule"]
