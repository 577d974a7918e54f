"""Float64 NumPy references and random inputs for the optimizer tests."""

from __future__ import annotations

import ml_dtypes
import numpy as np

NP_DTYPES = {
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float32": np.float32,
    "float64": np.float64,
}


def power_sign(var, m, lr, logbase, sign_decay, beta, grad):
    """One PowerSign step in float64; returns (var_t, m_t)."""
    var, m, grad = (np.asarray(x, np.float64) for x in (var, m, grad))
    m_t = beta * m + (1 - beta) * grad
    var_t = var - lr * np.exp(logbase * sign_decay * np.sign(m_t) * np.sign(grad)) * grad
    return var_t, m_t


def random_tensor(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Normal values with zeros, negatives, exact ties (repeated values) and a spread of magnitudes."""
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 2, size=shape)
    flat = x.reshape(-1)
    if flat.size:
        flat[rng.random(flat.size) < 0.1] = 0.0
        ties = rng.random(flat.size) < 0.1
        flat[ties] = flat[0]
    return x.astype(NP_DTYPES[dtype])


def as_float32(x: float) -> float:
    """The float64 value of x rounded to float32: the hyper-parameters the kernels actually use."""
    return float(np.float32(x))


def fused_ema_adam(grad, var, m, v, s, *, step, lr, ema_decay, beta1, beta2, eps, mode, bias_correction,
                   weight_decay):
    """One FusedEmaAdam step in float64 from the float32 hyper-parameters; returns (var, m, v, s, update)."""
    grad, var, m, v, s = (np.asarray(x, np.float64) for x in (grad, var, m, v, s))
    lr, ema_decay, beta1, beta2, eps, weight_decay = map(as_float32, (lr, ema_decay, beta1, beta2, eps, weight_decay))
    c1, c2 = (1 - beta1**step, 1 - beta2**step) if bias_correction else (1.0, 1.0)
    g = grad + weight_decay * var if mode == 0 else grad
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    update = (m / c1) / (np.sqrt(v / c2) + eps) + (weight_decay * var if mode == 1 else 0.0)
    var = var - lr * update
    return var, m, v, ema_decay * s + (1 - ema_decay) * var, update
