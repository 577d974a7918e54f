"""Float64 NumPy references of the operators' formulas, the error measure they are judged by, and random inputs
with zeros, negatives and ties: shared by the tests, the examples and the benchmarks (imports NumPy)."""

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


def fused_ema_adam_state(rng: np.random.Generator, shape, dtype: str) -> list[np.ndarray]:
    """var, m, v (>= 0) and s, as NumPy arrays of dtype."""
    var = random_tensor(rng, shape, dtype)
    m = random_tensor(rng, shape, dtype)
    # Adam keeps v near the mean of g^2, at least m^2 in size; v far below m^2 overflows half types honestly.
    v = (m.astype(np.float64) ** 2 * rng.uniform(1.0, 3.0, shape) + random_tensor(rng, shape, "float32") ** 2)
    v = v.astype(NP_DTYPES[dtype])
    s = (var.astype(np.float64) + random_tensor(rng, shape, "float32") * 0.01).astype(NP_DTYPES[dtype])
    return [var, m, v, s]


def fused_ema_adam_error_terms(before, grad, step: int, lr: float, attrs: dict):
    """The float64 result and, per output, the sum of |terms| that float32 rounding errors scale with."""
    ref_var, ref_m, ref_v, ref_s, update = fused_ema_adam(grad, *before, step=step, lr=lr, **attrs)
    var, m, v, s, g = (np.asarray(x, np.float64) for x in (*before, grad))
    b1, b2, ema, wd = attrs["beta1"], attrs["beta2"], attrs["ema_decay"], attrs["weight_decay"]
    c1, c2 = (1 - b1**step, 1 - b2**step) if attrs["bias_correction"] else (1.0, 1.0)
    # The float32 bias corrections cancel in 1 - beta^step: relative error eps32 * beta^step / (1 - beta^step).
    corr = (b1**step / c1 + b2**step / c2) if attrs["bias_correction"] else 0.0
    g_abs = np.abs(g) + (wd * np.abs(var) if attrs["mode"] == 0 else 0.0)
    m_terms = b1 * np.abs(m) + (1 - b1) * g_abs
    # |update| as if m_out had no cancellation: m_out's absolute error carries into the update.
    update_terms = m_terms / c1 / (np.sqrt(ref_v / c2) + attrs["eps"]) + np.abs(update)
    var_terms = np.abs(var) + lr * update_terms * (1 + corr)
    terms = {
        "var": var_terms,
        "m": m_terms,
        "v": b2 * np.abs(v) + (1 - b2) * g_abs**2,
        "s": ema * np.abs(s) + (1 - ema) * (np.abs(ref_var) + var_terms),
    }
    return {"var": ref_var, "m": ref_m, "v": ref_v, "s": ref_s}, terms
