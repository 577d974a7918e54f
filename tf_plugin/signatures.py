"""The operators' signatures, declared once.

Pure Python (no TensorFlow import), so that the raw-op wrappers, the GE IR prototypes and the docs can all read
it. The C++ registrations in ``tf_plugin/cc/ops`` must agree with it; ``tests/test_signatures.py`` checks the
registered OpDefs against this table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Op type names registered by the library: stock names behind one prefix, so they never collide with stock TF.
OP_PREFIX = "TfPlugin"


@dataclass(frozen=True)
class Input:
    """One op input. ``dtype`` is "T" (the op's type attr) or a fixed dtype name; ``state`` marks var/m/v/s."""

    name: str
    dtype: str = "T"
    state: bool = False
    scalar: bool = False  # one element, shape [] or [1]


@dataclass(frozen=True)
class Attr:
    name: str
    type: str  # "float", "int" or "bool"
    default: float | int | bool


@dataclass(frozen=True)
class GeSide:
    """How the operator appears in CANN's Graph Engine IR (REG_OP): its type, the input order, which TF inputs are GE
    attributes there (with their GE defaults), and the dtypes CANN's OpDef registers. Outputs are the state inputs
    under the same names (ref / in-place outputs), in IR input order."""

    type: str
    input_order: tuple[str, ...]
    attr_inputs: tuple[Attr, ...] = ()
    tf_only_attrs: tuple[str, ...] = ()  # TF attributes the GE op does not have
    dtypes: tuple[str, ...] = ("float16", "bfloat16", "float32")


@dataclass(frozen=True)
class OpSignature:
    name: str  # "PowerSign" -> TfPluginApplyPowerSign / TfPluginResourceApplyPowerSign
    inputs: tuple[Input, ...]
    attrs: tuple[Attr, ...]
    dtypes: tuple[str, ...]  # allowed T
    ge: GeSide | None = None

    @property
    def ref_op(self) -> str:
        return f"{OP_PREFIX}Apply{self.name}"

    @property
    def resource_op(self) -> str:
        return f"{OP_PREFIX}ResourceApply{self.name}"

    @property
    def state_inputs(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.inputs if i.state)

    def attr(self, name: str) -> Attr:
        return next(a for a in self.attrs if a.name == name)

    @property
    def defaults(self) -> dict[str, float | int | bool]:
        """Attribute name -> default value."""
        return {a.name: a.default for a in self.attrs}


POWER_SIGN = OpSignature(
    name="PowerSign",
    inputs=(
        Input("var", state=True),
        Input("m", state=True),
        Input("lr", scalar=True),
        Input("logbase", scalar=True),
        Input("sign_decay", scalar=True),
        Input("beta", scalar=True),
        Input("grad"),
    ),
    attrs=(Attr("use_locking", "bool", False),),
    dtypes=("float16", "bfloat16", "float32", "float64"),
    # CANN ops-nn optim/inplace_apply_power_sign: same inputs and order; OpDef dtypes {bf16, fp16, fp32}.
    ge=GeSide("InplaceApplyPowerSign", ("var", "m", "lr", "logbase", "sign_decay", "beta", "grad")),
)

FUSED_EMA_ADAM = OpSignature(
    name="FusedEmaAdam",
    inputs=(
        Input("var", state=True),
        Input("m", state=True),
        Input("v", state=True),
        Input("s", state=True),
        Input("grad"),
        Input("step", dtype="int64", scalar=True),
        Input("lr", dtype="float32", scalar=True),
    ),
    attrs=(
        Attr("ema_decay", "float", 0.9999),
        Attr("beta1", "float", 0.9),
        Attr("beta2", "float", 0.999),
        Attr("eps", "float", 1e-8),
        Attr("mode", "int", 1),
        Attr("bias_correction", "bool", True),
        Attr("weight_decay", "float", 0.0),
        Attr("use_locking", "bool", False),
    ),
    dtypes=("float16", "bfloat16", "float32"),
    # CANN ops-nn optim/apply_fused_ema_adam: grad first; lr is an attribute (default 1e-3); no use_locking.
    ge=GeSide("ApplyFusedEmaAdam", ("grad", "var", "m", "v", "s", "step"), attr_inputs=(Attr("lr", "float", 1e-3),),
              tf_only_attrs=("use_locking",)),
)

# lr is an input tensor in TF (schedules change it every step) and an attribute in GE; its default lives there.
FUSED_EMA_ADAM_LR_DEFAULT = FUSED_EMA_ADAM.ge.attr_inputs[0].default

ALL = (POWER_SIGN, FUSED_EMA_ADAM)


def check_fused_ema_adam_attrs(values: dict, shown_as: dict[str, str] | None = None) -> None:
    """FusedEmaAdam's attribute ranges, for the Python faces (the Keras optimizer, graph_ir.kernels); the TF op
    checks the same rules in tf_plugin/cc/fused_ema_adam_attrs.h. Decays in [0, 1), eps finite and > 0,
    weight_decay finite and >= 0, mode 0 or 1. Only the given keys are checked; a ValueError names the argument as
    `shown_as` spells it (e.g. Keras's "beta_1" for "beta1")."""
    shown_as = shown_as or {}

    def fail(name: str, rule: str, value) -> ValueError:
        return ValueError(f"{shown_as.get(name, name)} must be {rule}, got {value!r}")

    for name in ("ema_decay", "beta1", "beta2"):
        if name in values and not 0.0 <= values[name] < 1.0:
            raise fail(name, "in [0, 1)", values[name])
    if "eps" in values and not (math.isfinite(values["eps"]) and values["eps"] > 0):
        raise fail("eps", "a finite number > 0", values["eps"])
    if "weight_decay" in values and not (math.isfinite(values["weight_decay"]) and values["weight_decay"] >= 0):
        raise fail("weight_decay", "a finite number >= 0", values["weight_decay"])
    if "mode" in values and (isinstance(values["mode"], bool) or values["mode"] not in (0, 1)):
        raise fail("mode", "0 (L2) or 1 (AdamW)", values["mode"])
