"""The lowering table: TF op types -> GE ops, declaratively, as Ascend's TF adapter maps them (hicann/tensorflow
tf_adapter and the ops-math TF plugins, */framework/*_tf_plugin.cpp).

- The optimizer ops (stock ApplyPowerSign / ResourceApplyPowerSign and our four) are built from op_spec: the GE
  type, the TF inputs in GE IR order, which TF inputs become GE attributes (FusedEmaAdam's lr) and the TF
  attributes kept.
- The multi-tensor ops expand into one GE optimizer op per variable, the flat state split into GE Variables.
- Everything else of a training step (the forward pass, the loss, the gradients, shape plumbing) is lowered by the
  op families in graph_ir/lowering/ops, one module per family.
- Resource-variable assigns become the GE ref ops on the Variable: AssignVariableOp -> Assign, AssignAdd... ->
  AssignAdd, AssignSub... -> AssignSub (TF1 ref Assign/AssignAdd/AssignSub alike).
- ReadVariableOp, Identity, StopGradient, PreventGradient and Snapshot become Identity (a snapshot); NoOp disappears and its control
  edges pass through.
"""

from __future__ import annotations

from dataclasses import dataclass

import op_spec
from graph_ir.ir import registry


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
        tf_attrs=tuple(a.name for a in sig.ge_attrs if a not in ge.attr_inputs),
    )


_POWER_SIGN = _from_signature(op_spec.POWER_SIGN)
_FUSED_EMA_ADAM = _from_signature(op_spec.FUSED_EMA_ADAM)

# TF op type -> GE optimizer op. Stock ApplyPowerSign / ResourceApplyPowerSign have the same inputs as ours.
LOWERINGS: dict[str, OpLowering] = {
    "ApplyPowerSign": _POWER_SIGN,
    "ResourceApplyPowerSign": _POWER_SIGN,
    op_spec.POWER_SIGN.ref_op: _POWER_SIGN,
    op_spec.POWER_SIGN.resource_op: _POWER_SIGN,
    op_spec.FUSED_EMA_ADAM.ref_op: _FUSED_EMA_ADAM,
    op_spec.FUSED_EMA_ADAM.resource_op: _FUSED_EMA_ADAM,
}

# Multi-tensor ops -> (their signature, the GE op per variable): the lowering expands one call into N GE ops, each
# on the variable and on GE Variables split from the flat state (graph_ir/lowering/multi.py).
MULTI_LOWERINGS: dict[str, tuple[op_spec.MultiOpSignature, OpLowering]] = {
    op_spec.MULTI_POWER_SIGN.resource_op: (op_spec.MULTI_POWER_SIGN, _POWER_SIGN),
    op_spec.MULTI_FUSED_EMA_ADAM.resource_op: (op_spec.MULTI_FUSED_EMA_ADAM, _FUSED_EMA_ADAM),
}


def multi_input_names(sig: op_spec.MultiOpSignature, n: int) -> list[str]:
    """The names of a multi-tensor node's N-expanded inputs, in TF order ("vars", ..., "m", ..., "grads", ...)."""
    return [name for i in sig.inputs for name in ([i.name] * n if i.many else [i.name])]


IDENTITIES = ("Identity", "ReadVariableOp", "StopGradient", "PreventGradient", "Snapshot")
# Writes of a variable (its handle the first input), onto the GE op writing the Variable in place; the scatters are
# Keras's sparse optimizer updates (IndexedSlices gradients of an Embedding).
ASSIGNS = {"AssignVariableOp": "Assign", "AssignAddVariableOp": "AssignAdd", "AssignSubVariableOp": "AssignSub",
           "Assign": "Assign", "AssignAdd": "AssignAdd", "AssignSub": "AssignSub",
           "ResourceScatterAdd": "ScatterAdd", "ResourceScatterSub": "ScatterSub",
           "ResourceScatterUpdate": "ScatterUpdate"}
INPUTS = ("Placeholder", "VarHandleOp", "VariableV2")
PLUMBING = ("Const", "IdentityN", "NoOp", *IDENTITIES, *INPUTS)

