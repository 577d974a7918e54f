"""float16 variables and FusedEmaAdam's epsilon: with the default 1e-8 a pure float16 model trains to NaN (v
underflows to 0 for small gradients while m does not), from 1e-6 it trains; build warns below 1e-6, naming the
float16 variables, in both layouts."""

from __future__ import annotations

import warnings

import keras
import numpy as np
import pytest

from tf_plugin.keras_checks import FLOAT16_MIN_EPSILON
from tf_plugin.optimizers import FusedEmaAdam


def _float16_mlp(seed: int) -> keras.Model:
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu", dtype="float16"),
                             keras.layers.Dense(64, activation="relu", dtype="float16"),
                             keras.layers.Dense(1, dtype="float16")])


def _fit_losses(epsilon: float, seed: int) -> list[float]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2048, 32)).astype(np.float32)
    y = x @ (0.01 * rng.standard_normal((32, 1)).astype(np.float32))  # small targets: small gradients
    model = _float16_mlp(seed)
    model.compile(optimizer=FusedEmaAdam(1e-3, epsilon=epsilon), loss="mse")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(x, y, batch_size=256, epochs=3, verbose=0).history["loss"]


def _forced_underflow(epsilon: float) -> tuple[float, float]:
    """(the epoch's mean loss, the final weight) of one float16 weight trained on a batch whose gradient is -3.8e-3,
    then 30 batches of gradient 0, then one with input -100. The first step's v = (1 - beta2) * g**2 = 1.4e-8
    underflows float16 to 0 while m does not; with v = 0 each step moves the weight by lr * m_hat / epsilon, so by
    about 750 in all with epsilon 1e-8 (7.5 with 1e-6). The last input then makes the prediction -inf in float16, and
    log_cosh(-inf) is NaN."""
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros",
                                                                    dtype="float16")])
    x = np.array([[5e-3]] + [[0.0]] * 30 + [[-100.0]], np.float32)
    y = np.array([[1.0]] + [[0.0]] * 31, np.float32)
    model.compile(optimizer=FusedEmaAdam(1e-3, epsilon=epsilon), loss="log_cosh")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss = model.fit(x, y, batch_size=1, epochs=1, shuffle=False, verbose=0).history["loss"][-1]
    return loss, float(model.get_weights()[0].reshape(()))


def test_the_default_epsilon_gives_nan_in_float16_and_the_recommended_one_trains():
    loss, weight = _forced_underflow(1e-8)
    assert np.isnan(loss) and weight > 500
    loss, weight = _forced_underflow(FLOAT16_MIN_EPSILON)
    assert np.isfinite(loss) and weight < 10
    for seed in (0, 1):
        losses = _fit_losses(FLOAT16_MIN_EPSILON, seed)
        assert np.isfinite(losses).all() and losses[-1] < losses[0]


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "per_variable"])
def test_build_warns_about_a_small_epsilon_with_float16_variables(flat):
    model = _float16_mlp(0)
    with pytest.warns(UserWarning, match=r"epsilon=1e-08 and float16 variables \('\S+/kernel' \(shape \(32, 64\), "
                                         r"float16\).* and 3 more\).* Pass epsilon=1e-06 or more"):
        FusedEmaAdam(flat_state=flat).build(model.trainable_variables)
    float32 = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: a large enough epsilon, or no float16 variable
        FusedEmaAdam(epsilon=FLOAT16_MIN_EPSILON, flat_state=flat).build(_float16_mlp(0).trainable_variables)
        FusedEmaAdam(flat_state=flat).build(float32.trainable_variables)
