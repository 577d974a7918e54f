"""The two operators, declared once. Every other place (TF registrations, C++ checks, GE prototypes, wrappers,
optimizers, graph_ir.kernels, docs) derives from these declarations or is tested against them."""

from __future__ import annotations

from op_spec.signature import (
                               AT_LEAST_ONE,
                               FINITE,
                               NON_NEGATIVE_FINITE,
                               POSITIVE_FINITE,
                               UNIT_INTERVAL,
                               Attr,
                               GeSide,
                               Input,
                               MultiOpSignature,
                               OpSignature,
                               Rule,
)

POWER_SIGN = OpSignature(
    name="PowerSign",
    inputs=(
        Input("var", state=True, doc="the variable, updated in place"),
        Input("m", state=True, doc="the moving average of the gradient, updated in place"),
        Input("lr", scalar=True, doc="the learning rate"),
        Input("logbase", scalar=True, doc="log of the sign-agreement base"),
        Input("sign_decay", scalar=True, doc="the sign decay"),
        Input("beta", scalar=True, doc="the decay of m"),
        Input("grad", doc="the gradient"),
    ),
    attrs=(Attr("use_locking", "bool", False, doc="lock var and m during the update (ref variables)"),),
    dtypes=("float16", "bfloat16", "float32", "float64"),
    formula=("m_t = beta * m + (1 - beta) * grad\n"
             "var_t = var - lr * exp(logbase * sign_decay * sign(m_t) * sign(grad)) * grad"),
    # CANN ops-nn optim/inplace_apply_power_sign: same inputs and order; OpDef dtypes {bf16, fp16, fp32}.
    ge=GeSide("InplaceApplyPowerSign", ("var", "m", "lr", "logbase", "sign_decay", "beta", "grad")),
)

FUSED_EMA_ADAM = OpSignature(
    name="FusedEmaAdam",
    inputs=(
        Input("var", state=True, doc="the variable, updated in place"),
        Input("m", state=True, doc="the first moment, updated in place"),
        Input("v", state=True, doc="the second moment, updated in place"),
        Input("s", state=True, doc="the EMA of var, updated in place"),
        Input("grad", doc="the gradient"),
        Input("step", dtype="int64", scalar=True, rule=AT_LEAST_ONE, rule_when="bias_correction",
              doc="the 1-based step count"),
        # lr is a tensor in TF (schedules change it every step) and an attribute in GE.
        Input("lr", dtype="float32", scalar=True, rule=FINITE, doc="the learning rate"),
    ),
    attrs=(
        Attr("ema_decay", "float", 0.9999, UNIT_INTERVAL, doc="the decay of the EMA s"),
        Attr("beta1", "float", 0.9, UNIT_INTERVAL, doc="the decay of m"),
        Attr("beta2", "float", 0.999, UNIT_INTERVAL, doc="the decay of v"),
        Attr("eps", "float", 1e-8, POSITIVE_FINITE, doc="added to sqrt(v / c2)"),
        Attr("mode", "int", 1, Rule("0 (L2) or 1 (AdamW)", choices=(0, 1)), doc="1 AdamW (decoupled), 0 L2"),
        Attr("bias_correction", "bool", True, doc="divide m and v by (1 - beta^step)"),
        Attr("weight_decay", "float", 0.0, NON_NEGATIVE_FINITE, doc="the weight decay"),
        Attr("use_locking", "bool", False, doc="lock the variables during the update (ref variables)"),
    ),
    dtypes=("float16", "bfloat16", "float32"),
    formula=("(c1, c2) = (1 - beta1^step, 1 - beta2^step) if bias_correction else (1, 1)\n"
             "g = grad + weight_decay * var                 if mode == 0 else grad\n"
             "m = beta1 * m + (1 - beta1) * g\n"
             "v = beta2 * v + (1 - beta2) * g^2\n"
             "var = var - lr * ((m / c1) / (sqrt(v / c2) + eps)   (+ weight_decay * var if mode == 1))\n"
             "s = ema_decay * s + (1 - ema_decay) * var"),
    # CANN ops-nn optim/apply_fused_ema_adam: grad first; lr is an attribute (default 1e-3); no use_locking.
    ge=GeSide("ApplyFusedEmaAdam", ("grad", "var", "m", "v", "s", "step"),
              attr_inputs=(Attr("lr", "float", 1e-3, FINITE, doc="the learning rate"),),
              tf_only_attrs=("use_locking",)),
)

# lr is an input tensor in TF and an attribute in GE; its default lives on the GE side.
FUSED_EMA_ADAM_LR_DEFAULT = FUSED_EMA_ADAM.ge.attr_inputs[0].default

ALL = (POWER_SIGN, FUSED_EMA_ADAM)

# The multi-tensor forms: one call per dtype updates every variable of a step, over flat optimizer state.
_STATE_OFFSETS = Attr("state_offsets", "list(int)", (), doc=(
    "where each variable's state starts in the flat variables; empty: concatenated in vars order, the flat "
    "variables holding exactly the N variables' elements (given: a part of a larger layout, e.g. the variables of a "
    "step that have gradients)"))
MULTI_POWER_SIGN = MultiOpSignature(POWER_SIGN, extra_attrs=(_STATE_OFFSETS,))
MULTI_FUSED_EMA_ADAM = MultiOpSignature(FUSED_EMA_ADAM, extra_attrs=(
    _STATE_OFFSETS,
    Attr("no_decay", "list(int)", (), doc="indices into vars whose weight_decay is 0 (Keras's "
         "exclude_from_weight_decay)"),))

ALL_MULTI = (MULTI_POWER_SIGN, MULTI_FUSED_EMA_ADAM)
