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
