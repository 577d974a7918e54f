"""The lowering table: TF op types -> GE ops, declaratively (the GE type, the TF inputs in GE IR order, which TF
inputs become GE attributes, the TF attributes kept), built from op_spec so that it agrees with the TF
registrations and the GE prototypes."""

from __future__ import annotations

from dataclasses import dataclass

import op_spec
from graph_ir import registry


@dataclass(frozen=True)
class OpLowering:
    ge_type: str
    tf_inputs: tuple[str, ...]  # the TF op's inputs, in TF order
    ge_inputs: tuple[str, ...]  # the GE op's inputs, in IR order (names shared with tf_inputs)
    attr_inputs: tuple[str, ...] = ()  # TF inputs that are GE attributes: must be constants
    tf_attrs: tuple[str, ...] = ()  # TF attributes copied by name (AutoMapping semantics)

    @property
    def scalar_inputs(self) -> tuple[str, ...]:
        return tuple(i.name for i in registry.get(self.ge_type).inputs if i.scalar)


def _from_signature(sig: op_spec.OpSignature) -> OpLowering:
    ge = sig.ge
    return OpLowering(
        ge_type=ge.type,
        tf_inputs=tuple(i.name for i in sig.inputs),
        ge_inputs=ge.input_order,
        attr_inputs=tuple(a.name for a in ge.attr_inputs),
        tf_attrs=tuple(a.name for a in sig.attrs if a.name not in ge.tf_only_attrs),
    )


_POWER_SIGN = _from_signature(op_spec.POWER_SIGN)
_FUSED_EMA_ADAM = _from_signature(op_spec.FUSED_EMA_ADAM)

# TF op type -> GE op. Stock ApplyPowerSign / ResourceApplyPowerSign have the same inputs as ours.
LOWERINGS: dict[str, OpLowering] = {
    "ApplyPowerSign": _POWER_SIGN,
    "ResourceApplyPowerSign": _POWER_SIGN,
    op_spec.POWER_SIGN.ref_op: _POWER_SIGN,
    op_spec.POWER_SIGN.resource_op: _POWER_SIGN,
    op_spec.FUSED_EMA_ADAM.ref_op: _FUSED_EMA_ADAM,
    op_spec.FUSED_EMA_ADAM.resource_op: _FUSED_EMA_ADAM,
}
PLUMBING = ("Placeholder", "Const", "Identity", "ReadVariableOp", "NoOp", "Cast", "VarHandleOp", "VariableV2",
            "AssignVariableOp", "Assign")


