"""FusedEmaAdam ops: a first check against a float64 NumPy reference (the full suite is the FusedEmaAdam issue's)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import tf_plugin
from tests.reference import random_tensor


def reference(grad, var, m, v, s, step, lr, ema_decay, beta1, beta2, eps, mode, bias_correction, weight_decay):
    grad, var, m, v, s = (np.asarray(x, np.float64) for x in (grad, var, m, v, s))
    c1, c2 = (1 - beta1**step, 1 - beta2**step) if bias_correction else (1.0, 1.0)
    g = grad + weight_decay * var if mode == 0 else grad
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    update = (m / c1) / (np.sqrt(v / c2) + eps) + (weight_decay * var if mode == 1 else 0.0)
    var = var - lr * update
    return var, m, v, ema_decay * s + (1 - ema_decay) * var


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("bias_correction", [True, False])
def test_steps_against_float64(mode, bias_correction):
    rng = np.random.default_rng(mode * 2 + bias_correction)
    shape = (257,)
    var0 = random_tensor(rng, shape, "float32")
    state = [var0, np.zeros(shape, np.float32), np.zeros(shape, np.float32), var0.copy()]
    variables = [tf.Variable(x) for x in state]
    hp = {"ema_decay": 0.99, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "mode": mode,
          "bias_correction": bias_correction, "weight_decay": 0.01}
    ref = [x.astype(np.float64) for x in state]
    for step in range(1, 6):
        g = random_tensor(rng, shape, "float32")
        tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(var=variables[0], m=variables[1], v=variables[2],
                                                    s=variables[3], grad=g, step=step, lr=1e-2, **hp)
        ref = list(reference(g, *ref, step=step, lr=1e-2, **hp))
    for got, want in zip(variables, ref):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)


def test_bad_step_leaves_variables():
    variables = [tf.Variable(np.full(4, x, np.float32)) for x in (1.0, 0.0, 0.0, 1.0)]
    with pytest.raises(tf.errors.InvalidArgumentError, match="step must be >= 1"):
        tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(var=variables[0], m=variables[1], v=variables[2],
                                                    s=variables[3], grad=np.ones(4, np.float32), step=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="beta1 must be in"):
        tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(var=variables[0], m=variables[1], v=variables[2],
                                                    s=variables[3], grad=np.ones(4, np.float32), step=1, beta1=1.5)
    for x, want in zip(variables, (1.0, 0.0, 0.0, 1.0)):
        np.testing.assert_array_equal(x.numpy(), np.full(4, want))
