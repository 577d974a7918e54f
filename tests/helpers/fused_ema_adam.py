"""FusedEmaAdam test helpers: the op call on four variables and the one-step check against float64."""

from __future__ import annotations

import numpy as np

import tf_plugin
from op_spec.reference import NP_DTYPES
from op_spec.reference import fused_ema_adam_error_terms as error_terms

HYPER = {"ema_decay": 0.99, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
EPS32 = float(np.finfo(np.float32).eps)


def apply(variables, grad, step, lr, **attrs):
    var, m, v, s = variables
    return tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(var=var, m=m, v=v, s=s, grad=grad, step=step, lr=lr, **attrs)


def check_one_step(got, before, grad, dtype, step, lr, attrs):
    """Each output within one rounding to T of the float64 result, plus float32 compute error.

    Per output, |got - ref| <= eps_T/2 * |ref| + 8 eps32 * (sum of |terms|) + the smallest subnormal of T (for
    float32 the first term is part of the second). A result that overflows T must be the matching infinity.
    """
    refs, terms = error_terms(before, grad, step, lr, attrs)
    info = np.finfo(NP_DTYPES[dtype])
    for (name, ref), out in zip(refs.items(), got):
        out = np.asarray(out, np.float64)
        rounded = ref.astype(NP_DTYPES[dtype])
        err = np.where(np.isinf(rounded) & (out == rounded), 0.0, np.abs(out - ref))
        bound = (float(info.eps) / 2 if dtype != "float32" else 0.0) * np.abs(ref) + 8 * EPS32 * terms[name]
        bound = bound + float(info.smallest_subnormal)
        bad = ~(err <= bound)
        assert not bad.any(), f"{name}: {bad.sum()} elements off, worst {err[bad].max()} vs bound {bound[bad].min()}"
