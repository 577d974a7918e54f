"""Max error of one ResourceApplyFusedEmaAdam step against the float64 formula, per dtype and output.

Errors are in units of T's epsilon times the size of the operands, max(|reference|, sum of |terms|) (values below
T's smallest normal count as that normal): 0.5 is a correctly rounded result, and cancellation inside the formula
does not inflate the figure. The state is drawn by op_spec.reference.fused_ema_adam_state, as in the tests.
"""

from __future__ import annotations

import argparse

import numpy as np
import tensorflow as tf

import tf_plugin
from op_spec.reference import NP_DTYPES, fused_ema_adam, random_tensor
from op_spec.reference import fused_ema_adam_error_terms as error_terms
from op_spec.reference import fused_ema_adam_state as make_state

ATTRS = {"ema_decay": 0.99, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "bias_correction": True}


def max_errors(dtype: str, mode: int, weight_decay: float, size: int, step: int) -> list[float]:
    rng = np.random.default_rng(step)
    state = make_state(rng, (size,), dtype)
    grad = random_tensor(rng, (size,), dtype)
    variables = [tf.Variable(x) for x in state]
    attrs = {**ATTRS, "mode": mode, "weight_decay": weight_decay}
    tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(var=variables[0], m=variables[1], v=variables[2], s=variables[3],
                                                grad=grad, step=step, lr=0.01, **attrs)
    refs, terms = error_terms(state, grad, step, 0.01, attrs)
    info = np.finfo(NP_DTYPES[dtype])
    out = []
    for got, (name, want) in zip(variables, refs.items()):
        finite = np.isfinite(want.astype(NP_DTYPES[dtype]))
        err = np.abs(got.numpy().astype(np.float64) - want)[finite]
        size_ = np.maximum(np.maximum(np.abs(want), terms[name])[finite], float(info.tiny))
        out.append(float((err / (float(info.eps) * size_)).max()))
    return out


def three_steps(size: int) -> dict[str, float]:
    """The spec's three-step case: fresh state (m = v = 0, s = var), steps 1-3 at lr 0.1, 0.01, 0.5 on the
    multi-tensor op; max |got - float64| / max |float64| of var and s. Also what float32 bias corrections (the
    Ascend kernel's 1 - beta^step in float32) would give, emulated in float64."""
    rng = np.random.default_rng(5)
    var0 = rng.standard_normal(size).astype(np.float32)
    attrs = {**ATTRS, "ema_decay": 0.9, "mode": 1, "weight_decay": 0.01}
    state = [tf.Variable(var0), tf.Variable(np.zeros(size, np.float32)), tf.Variable(np.zeros(size, np.float32)),
             tf.Variable(var0)]
    exact = [var0.astype(np.float64), np.zeros(size), np.zeros(size), var0.astype(np.float64)]
    float32_c = [x.copy() for x in exact]
    for step, lr in enumerate((0.1, 0.01, 0.5), start=1):
        grad = rng.standard_normal(size).astype(np.float32)
        tf_plugin.raw_ops.ResourceApplyMultiFusedEmaAdam(vars=[state[0]], m=state[1], v=state[2], s=state[3],
                                                         grads=[grad], step=step, lr=lr, **attrs)
        exact = list(fused_ema_adam(grad, *exact, step=step, lr=lr, **attrs)[:4])
        float32_c = _float32_corrections_step(grad, float32_c, step, lr, attrs)
    out = {}
    for name, k in (("var", 0), ("s", 3)):
        scale = np.abs(exact[k]).max()
        out[f"ours {name}"] = float(np.abs(state[k].numpy() - exact[k]).max() / scale)
        out[f"float32 corrections {name}"] = float(np.abs(float32_c[k] - exact[k]).max() / scale)
    return out


def _float32_corrections_step(grad, state, step, lr, attrs):
    """One step in float64 except c1, c2 = 1 - beta^step computed in float32, then rounded to float32 values."""
    f = np.float32
    c1 = float(f(1) - f(attrs["beta1"]) ** f(step))
    c2 = float(f(1) - f(attrs["beta2"]) ** f(step))
    var, m, v, s = state
    b1, b2, ema, wd = (float(f(attrs[k])) for k in ("beta1", "beta2", "ema_decay", "weight_decay"))
    m = b1 * m + (1 - b1) * grad
    v = b2 * v + (1 - b2) * grad.astype(np.float64) ** 2
    var = var - float(f(lr)) * ((m / c1) / (np.sqrt(v / c2) + float(f(attrs["eps"]))) + wd * var)
    return [var, m, v, ema * s + (1 - ema) * var]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1 << 20)
    args = parser.parse_args()
    print(f"max error in eps_T x operand size, one step, {args.size} elements, steps 1 and 1000, modes 0/1, wd 0/0.01")
    print(f"{'dtype':<9} {'var':>7} {'m':>7} {'v':>7} {'s':>7}")
    for dtype in ("float32", "float16", "bfloat16"):
        worst = np.zeros(4)
        for mode in (0, 1):
            for wd in (0.0, 0.01):
                for step in (1, 1000):
                    worst = np.maximum(worst, max_errors(dtype, mode, wd, args.size, step))
        print(f"{dtype:<9} " + " ".join(f"{x:>7.2f}" for x in worst))
    print(f"three steps at lr 0.1, 0.01, 0.5 (float32, {args.size} elements), max |error| / max |float64|:")
    for name, value in three_steps(args.size).items():
        print(f"  {name:<24} {value:.2e}")


if __name__ == "__main__":
    main()
