"""Runs a fixed battery of updates on the kernels' current ISA path and saves every result (run as a subprocess by
tests/kernels/test_isa_paths.py, once per path, with TF_PLUGIN_ISA set).

    python -m tests.helpers.isa_battery OUT.npz
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np
import tensorflow as tf

import tf_plugin
from op_spec import reference

SIZES = [0, 1, 7, 8, 15, 16, 17, 31, 33, 100, 1000, 4099]
DTYPES = ["float32", "float16", "bfloat16"]
# Multipliers c representable in T: the float32 product g * c is exact, so its narrowing hits every rounding case,
# ties included, and subnormal results (2^-15 for half; for bfloat16, 2^-120 gives float32 subnormals, which TF flushes).
MULTIPLIERS = {
    "float16": [1 + 2.0**-10, 1.5, 0.333251953125, 2.0**-15, 1025.0, -3.0],
    "bfloat16": [1 + 2.0**-7, 1.5, 0.333984375, 2.0**-120, 255.0, -3.0],
}


def hostile(rng: np.random.Generator, n: int, dtype: str) -> np.ndarray:
    """Random values with zeros of both signs, ties, NaN, +-Inf, subnormals and huge values mixed in."""
    x = reference.random_tensor(rng, (n,), "float32").astype(np.float32)
    specials = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-40, -1e-42, 6e4, -3e38, 1e-8], np.float32)
    if n:
        picks = rng.random(n) < 0.15
        x[picks] = rng.choice(specials, picks.sum())
    return x.astype(reference.NP_DTYPES[dtype])


def power_sign(var, m, grad, lr, logbase, sign_decay, beta):
    dtype = tf.as_dtype(var.dtype)
    v, mm = tf.Variable(var), tf.Variable(m)
    tf_plugin.raw_ops.ResourceApplyPowerSign(var=v.handle, m=mm.handle, lr=tf.constant(lr, dtype),
                                             logbase=tf.constant(logbase, dtype),
                                             sign_decay=tf.constant(sign_decay, dtype), beta=tf.constant(beta, dtype),
                                             grad=tf.constant(grad))
    return v.numpy(), mm.numpy()


def fused(grad, var, m, v, s, **attrs):
    vs = [tf.Variable(x) for x in (var, m, v, s)]
    tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(var=vs[0], m=vs[1], v=vs[2], s=vs[3], grad=tf.constant(grad), **attrs)
    return [x.numpy() for x in vs]


def battery() -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(2026)
    for dtype in DTYPES:
        for n in SIZES:
            var, m, grad = (hostile(rng, n, dtype) for _ in range(3))
            for beta, logbase in ((0.9, 1.0), (0.0, 0.5), (0.5, -2.0), (0.7, 200.0)):  # 200: exp overflows
                out[f"ps/{dtype}/{n}/{beta}/var"], out[f"ps/{dtype}/{n}/{beta}/m"] = power_sign(
                    var, m, grad, 0.01, logbase, 0.75, beta)
            mm, vv = hostile(rng, n, dtype), np.abs(hostile(rng, n, dtype))
            for mode in (0, 1):
                res = fused(grad, var, mm, vv, var.copy(), step=3, lr=0.01, ema_decay=0.9, beta1=0.8, beta2=0.99,
                            eps=1e-6, mode=mode, weight_decay=0.02)
                for name, r in zip(("var", "m", "v", "s"), res):
                    out[f"fea/{dtype}/{n}/{mode}/{name}"] = r
    # Narrowing: every 16-bit pattern as grad, var = 0, lr = -c, logbase = 0 (scale 1): var = narrow(g * c).
    for dtype, multipliers in MULTIPLIERS.items():
        np_dtype = reference.NP_DTYPES[dtype]
        every = np.arange(1 << 16, dtype=np.uint16).view(np_dtype)
        zeros = np.zeros_like(every)
        for c in multipliers:
            out[f"narrow/{dtype}/{c}"] = power_sign(zeros, zeros, every, -c, 0.0, 1.0, 0.0)[0]
    return out


def save(path: str) -> None:
    """Saved as raw bits (an .npz cannot hold ml_dtypes' bfloat16); the dtype is the key's second part."""
    bits = {k: v.view(np.uint32 if v.itemsize == 4 else np.uint16) for k, v in battery().items()}
    np.savez(path, isa=np.array(tf_plugin.isa()), **bits)


def load(path: str) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        out = {"isa": str(data["isa"])}
        for key in data.files:
            if key != "isa":
                out[key] = data[key].view(reference.NP_DTYPES[key.split("/")[1]])
    return out


if __name__ == "__main__":
    assert ml_dtypes  # registers bfloat16 with NumPy
    save(sys.argv[1])
