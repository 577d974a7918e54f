"""Keras fit with jit_compile=True: our optimizers take the portable path inside XLA and give the fused path's
weights: within 1e-5 relative for float32 models; for float16 and bfloat16 variables within 1 ulp of T (XLA's CPU
compiler contracts multiply-adds into FMAs, which can flip a rounding to T), on a model whose gradients are exact
in every dtype so that only the optimizer differs."""

from __future__ import annotations

import keras
import ml_dtypes
import numpy as np
import pytest

from tests.helpers.models import classification_data, small_model
from tf_plugin.optimizers import FusedEmaAdam, PowerSign

OPTIMIZERS = {
    "powersign": lambda: PowerSign(learning_rate=0.01),
    "powersign-cosine": lambda: PowerSign(learning_rate=0.02, sign_decay="cosine", decay_steps=20),
    "fused_ema_adam": lambda: FusedEmaAdam(learning_rate=0.01, weight_decay=0.01, ema_decay=0.9),
    "fused_ema_adam-l2": lambda: FusedEmaAdam(learning_rate=0.01, weight_decay=0.01, mode="l2"),
}


def _fit_weights(make_model, make_optimizer, x, y, loss, jit: bool) -> list[np.ndarray]:
    model = make_model()
    model.compile(optimizer=make_optimizer(), loss=loss, jit_compile=jit)
    model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False)
    return [np.asarray(w) for w in model.get_weights()] + [np.asarray(v) for v in model.optimizer.variables[2:]]


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_float32_fit_under_xla_matches_the_fused_path(name):
    x, y = classification_data(3, n=64)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    fused, portable = (_fit_weights(small_model, OPTIMIZERS[name], x, y, loss, jit) for jit in (False, True))
    for a, b in zip(fused, portable):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-7)


def _exact_model(dtype: str):
    """One bias-free Dense layer: with one-hot inputs and a linear loss, its gradients are exact in any dtype."""
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, use_bias=False, dtype=dtype)])


def _linear_loss(y_true, y_pred):
    return keras.ops.mean(y_true * y_pred)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_half_fit_under_xla_within_one_ulp(name, dtype):
    rng = np.random.default_rng(0)
    x = np.eye(8, dtype=np.float32)[rng.integers(0, 8, 64)]
    y = rng.choice([-0.5, -0.25, 0.25, 0.5], size=(64, 4)).astype(np.float32)
    fused, portable = (_fit_weights(lambda: _exact_model(dtype), OPTIMIZERS[name], x, y, _linear_loss, jit)
                       for jit in (False, True))
    eps = float(ml_dtypes.finfo(fused[0].dtype).eps)
    for a, b in zip(fused, portable):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        np.testing.assert_allclose(b64, a64, rtol=eps, atol=0)
