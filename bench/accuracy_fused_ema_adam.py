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
from op_spec.reference import NP_DTYPES, random_tensor
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


if __name__ == "__main__":
    main()
