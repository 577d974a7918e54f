"""FusedEmaAdam with a learning rate known only when the step runs (a schedule, a callable, an lr variable fed
between steps), lowered as GE elementwise ops that compute exactly what our fused kernel computes.

GE's ApplyFusedEmaAdam takes lr as an attribute (CANN ops-nn apply_fused_ema_adam_proto.h: `.ATTR(lr, Float, 1e-3)`),
so it can only carry a learning rate known when lowering. Where the step computes lr, or reads it from a variable
that must keep driving the step, the update is built from GE ops that take lr as a tensor, in the kernel's order of
operations (kernels/fused_ema_adam.h), everything in float32:

    inv_c1, inv_c2 = float32(1 / (1 - beta1^step)), float32(1 / (1 - beta2^step))   (float64; 1 without correction)
    g       = grad + var * weight_decay                     (mode 0, L2)
    m_out   = m * beta1 + g * (1 - beta1)
    v_out   = v * beta2 + (g * g) * (1 - beta2)
    update  = (m_out * inv_c1) / (sqrt(v_out * inv_c2) + eps)   (+ var * weight_decay: mode 1, AdamW)
    var_out = var - update * lr
    s_out   = s * ema_decay + var_out * (1 - ema_decay)

float16 and bfloat16 state is Cast to float32 and the results Cast back (round to nearest even), as the kernel
widens and narrows. The kernel is compiled without FMA contraction and IEEE float32 sqrt and division are correctly
rounded, so the ops give the kernel's bits; the one difference is subnormal results, which TF's kernels flush to
zero (FTZ/DAZ) and NumPy keeps. lr passes through GE CheckNumerics first, so a non-finite learning rate stops the
step before anything is written, as the TF op refuses it (InvalidArgument). Tested in
tests/graph_ir/test_lowering_schedules.py against the TF op and whole Keras steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import op_spec
from graph_ir.ir.errors import LoweringError
from graph_ir.ir.graph import Graph
from graph_ir.ir.nodes import Handle, Node

_DEFAULTS = {a.name: a.default for a in op_spec.FUSED_EMA_ADAM.attrs}


class _Builder:
    """Adds the nodes of one update, named `{name}/...`, each after `controls`."""

    def __init__(self, graph: Graph, name: str, controls: list[Node]):
        self.graph, self.name, self.controls = graph, name, controls

    def op(self, ge_type: str, suffix: str, *inputs: Handle, controls: list[Node] = (), **attrs: Any) -> Handle:
        return self.graph.add_node(ge_type, list(inputs), attrs, name=f"{self.name}/{suffix}",
                                   control_inputs=[*self.controls, *controls]).output(0)

    def const(self, suffix: str, value: Any, dtype: Any = np.float32) -> Handle:
        return self.graph.add_node("Const", (), {"value": np.asarray(value, dtype=dtype)},
                                   name=f"{self.name}/{suffix}", control_inputs=self.controls).output(0)

    def scalar(self, suffix: str, h: Handle) -> Handle:
        """h (one element) as a rank-0 tensor."""
        if h.shape == ():
            return h
        return self.op("Reshape", f"{suffix}_scalar", h, self.const(f"{suffix}_scalar_shape", [], np.int64))


def _inv_correction(b: _Builder, beta: np.float32, step64: Handle, suffix: str) -> Handle:
    """float32(1 / (1 - beta^step)), computed in float64 from the float32 beta (the kernel's per-call scalar)."""
    power = b.op("Pow", f"{suffix}_power", b.const(f"{suffix}_beta", np.float64(beta), np.float64), step64)
    correction = b.op("Sub", f"{suffix}", b.const(f"{suffix}_one", 1.0, np.float64), power)
    inverse = b.op("RealDiv", f"inv_{suffix}", b.const(f"inv_{suffix}_one", 1.0, np.float64), correction)
    return b.op("Cast", f"inv_{suffix}_float32", inverse, dst_type="float32")


def fused_ema_adam_with_lr_tensor(graph: Graph, name: str, attrs: dict[str, Any], grad: Handle, var: Handle,
                                  m: Handle, v: Handle, s: Handle, step: Handle, lr: Handle,
                                  controls: list[Node]) -> list[Node]:
    """Adds the FusedEmaAdam update of var, m, v, s (Variables) with a float32 lr tensor of one element; `attrs`
    are ApplyFusedEmaAdam's other attributes (defaults from op_spec where absent). Returns the four Assigns, var's
    last: it runs after the others, so that a control edge on it orders after the whole update."""
    where = f"FusedEmaAdam {name!r}"
    shapes = {"grad": grad.shape, "var": var.shape, "m": m.shape, "v": v.shape, "s": s.shape}
    if len(set(shapes.values())) != 1:
        raise LoweringError(f"{where}: grad, var, m, v and s must have one shape, got {shapes}")
    dtypes = {h.dtype.name for h in (grad, var, m, v, s)}
    if len(dtypes) != 1 or next(iter(dtypes)) not in op_spec.FUSED_EMA_ADAM.dtypes:
        raise LoweringError(f"{where}: grad, var, m, v and s must share one of {op_spec.FUSED_EMA_ADAM.dtypes}, got "
                            f"{sorted(dtypes)}")
    if lr.dtype.name != "float32" or lr.desc.num_elements != 1 or step.desc.num_elements != 1:
        raise LoweringError(f"{where}: lr must be one float32 and step one int64, got {lr.dtype.name}{list(lr.shape)} "
                            f"and {step.dtype.name}{list(step.shape)}")
    a = {**_DEFAULTS, **attrs}
    f32 = np.float32
    beta1, beta2, ema = f32(a["beta1"]), f32(a["beta2"]), f32(a["ema_decay"])
    b = _Builder(graph, name, controls)
    checked_lr = b.op("CheckNumerics", "lr_checked", b.scalar("lr", lr),
                      message=f"{where}: the learning rate must be finite")
    wide = var.dtype.name != "float32"

    def read(h: Handle, what: str) -> Handle:
        return b.op("Cast", f"{what}_float32", h, dst_type="float32") if wide else h

    w, g, m_in, v_in, s_in = (read(h, k) for h, k in ((var, "var"), (grad, "grad"), (m, "m"), (v, "v"), (s, "s")))
    decay = b.const("weight_decay", f32(a["weight_decay"]))
    decoupled = int(a["mode"]) == 1
    if not decoupled:
        g = b.op("Add", "g", g, b.op("Mul", "var_decay", w, decay))
    m_out = b.op("Add", "m_out", b.op("Mul", "m_beta1", m_in, b.const("beta1", beta1)),
                 b.op("Mul", "g_beta1", g, b.const("one_minus_beta1", f32(1) - beta1)))
    v_out = b.op("Add", "v_out", b.op("Mul", "v_beta2", v_in, b.const("beta2", beta2)),
                 b.op("Mul", "g2_beta2", b.op("Mul", "g2", g, g), b.const("one_minus_beta2", f32(1) - beta2)))
    m_hat, v_hat = m_out, v_out
    if a["bias_correction"]:
        step64 = b.op("Cast", "step_float64", b.scalar("step", step), dst_type="float64")
        m_hat = b.op("Mul", "m_hat", m_out, _inv_correction(b, beta1, step64, "c1"))
        v_hat = b.op("Mul", "v_hat", v_out, _inv_correction(b, beta2, step64, "c2"))
    denom = b.op("Add", "denom", b.op("Sqrt", "sqrt_v_hat", v_hat), b.const("eps", f32(a["eps"])))
    update = b.op("RealDiv", "update", m_hat, denom)
    if decoupled:
        update = b.op("Add", "update_decayed", update, b.op("Mul", "var_decay", w, decay))
    var_out = b.op("Sub", "var_out", w, b.op("Mul", "step_size", update, checked_lr))
    s_out = b.op("Add", "s_out", b.op("Mul", "s_ema", s_in, b.const("ema_decay", ema)),
                 b.op("Mul", "var_ema", var_out, b.const("one_minus_ema_decay", f32(1) - ema)))

    def store(ref: Handle, value: Handle, what: str, after: list[Node]) -> Node:
        if wide:
            value = b.op("Cast", f"{what}_{var.dtype.name}", value, dst_type=var.dtype.name)
        # Every write waits for the lr check, so a refused lr writes nothing.
        return graph.add_node("Assign", [ref, value], name=f"{name}/assign_{what}",
                              control_inputs=[*controls, checked_lr.node, *after])

    assigns = [store(m, m_out, "m", []), store(v, v_out, "v", []), store(s, s_out, "s", [])]
    return [*assigns, store(var, var_out, "var", assigns)]
