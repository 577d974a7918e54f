"""The portable path (stock TF ops, tf_plugin/portable.py) against the fused kernels, for every dtype.

Run eagerly (a variable on a device without our kernels) it is bitwise equal. Inside a tf.function, Grappler may
constant-fold PowerSign's exp with Eigen's exp (not libm's) and reassociate products; inside XLA, the CPU compiler
always contracts a multiply and an add into one FMA. There the results stay within 1 ulp of T for float16 and
bfloat16, and within a few float32 (float64) ulps of the operands' size for float32 (float64).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

import tf_plugin
from op_spec.reference import fused_ema_adam_error_terms, fused_ema_adam_state, random_tensor
from tf_plugin import raw_ops

N = 50_003
PS_SCALARS = {"lr": 0.01, "logbase": 0.7, "sign_decay": 0.9, "beta": 0.9}
FEA_ATTRS = {"lr": 0.01, "ema_decay": 0.9, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01,
             "bias_correction": True}
ULPS = {"float16": 1.0, "bfloat16": 1.0, "float32": 4.0, "float64": 4.0}  # of T, times the operands' size
WAYS = ["eager", "function", "xla"]


def _portable(way: str, step) -> None:
    """Runs step() on the portable path: forced (as for a variable on a GPU) eagerly or in a tf.function, or
    chosen by the wrappers themselves inside an XLA-compiled tf.function."""
    if way == "xla":
        tf.function(step, jit_compile=True)()
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(raw_ops, "path_for", lambda var: raw_ops.PORTABLE)
        step() if way == "eager" else tf.function(step)()


def _ulps_of_terms(a: np.ndarray, b: np.ndarray, terms: np.ndarray) -> float:
    """max |a - b| in units of T's epsilon times the size of the operands (the sum of |terms|)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert np.array_equal(np.isnan(a64), np.isnan(b64))
    ok = np.isfinite(a64) & np.isfinite(b64)
    eps = float(ml_dtypes.finfo(a.dtype).eps)
    scale = eps * np.maximum(np.asarray(terms, np.float64)[ok], 1e-300)
    return float(np.max(np.abs(a64 - b64)[ok] / scale, initial=0.0))


def _compare(fused: list[np.ndarray], portable: list[np.ndarray], terms: dict, way: str, dtype: str) -> None:
    for (name, t), a, b in zip(terms.items(), fused, portable):
        if way == "eager":
            assert a.tobytes() == b.tobytes(), name
        else:
            assert _ulps_of_terms(a, b, t) <= ULPS[dtype], name


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_power_sign(dtype, way):
    rng = np.random.default_rng(3)
    var0, m0, g = (random_tensor(rng, (N,), dtype) for _ in range(3))
    results = []
    for portable in (False, True):
        var, m = tf.Variable(var0), tf.Variable(m0)

        def step(var=var, m=m):
            tf_plugin.raw_ops.ResourceApplyPowerSign(var=var, m=m, grad=g, **PS_SCALARS)

        _portable(way, step) if portable else step()
        results.append([var.numpy(), m.numpy()])
    p = PS_SCALARS
    v64, m64, g64 = (x.astype(np.float64) for x in (var0, m0, g))
    terms = {"var": np.abs(v64) + p["lr"] * np.exp(abs(p["logbase"] * p["sign_decay"])) * np.abs(g64),
             "m": p["beta"] * np.abs(m64) + (1 - p["beta"]) * np.abs(g64)}
    _compare(*results, terms, way, dtype)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_fused_ema_adam(dtype, mode, way):
    rng = np.random.default_rng(4)
    state, g = fused_ema_adam_state(rng, (N,), dtype), random_tensor(rng, (N,), dtype)
    results = []
    for portable in (False, True):
        variables = [tf.Variable(x) for x in state]

        def step(variables=variables):
            tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(var=variables[0], m=variables[1], v=variables[2],
                                                        s=variables[3], grad=g, step=3, mode=mode, **FEA_ATTRS)

        _portable(way, step) if portable else step()
        results.append([x.numpy() for x in variables])
    attrs = {k: v for k, v in FEA_ATTRS.items() if k != "lr"}
    _, terms = fused_ema_adam_error_terms(state, g, 3, FEA_ATTRS["lr"], {**attrs, "mode": mode})
    _compare(*results, terms, way, dtype)


def test_ref_variables_take_the_portable_path():
    rng = np.random.default_rng(5)
    var0, m0, g = (random_tensor(rng, (1000,), "float32") for _ in range(3))
    results = []
    for path in (raw_ops.FUSED, raw_ops.PORTABLE):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(raw_ops, "path_for", lambda var, path=path: path)
            with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
                var = tf.compat.v1.Variable(var0, use_resource=False)
                m = tf.compat.v1.Variable(m0, use_resource=False)
                out = tf_plugin.raw_ops.ApplyPowerSign(var=var, m=m, grad=g, use_locking=True, **PS_SCALARS)
                sess.run(tf.compat.v1.global_variables_initializer())
                results.append([sess.run(out), sess.run(m)])
    p = PS_SCALARS
    terms = {"var": np.abs(var0) + p["lr"] * np.exp(abs(p["logbase"] * p["sign_decay"])) * np.abs(g),
             "m": p["beta"] * np.abs(m0) + (1 - p["beta"]) * np.abs(g)}
    _compare(*results, terms, "function", "float32")


def test_portable_path_checks_like_the_op():
    variables = [tf.Variable(np.ones(3, np.float32)) for _ in range(4)]
    kwargs = {"var": variables[0], "m": variables[1], "v": variables[2], "s": variables[3],
              "grad": np.ones(3, np.float32)}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(raw_ops, "path_for", lambda var: raw_ops.PORTABLE)
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"beta1 must be in \[0, 1\)"):
            tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(step=1, beta1=1.0, **kwargs)
        with pytest.raises(tf.errors.InvalidArgumentError, match="step must be >= 1"):
            tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(step=0, **kwargs)
        with pytest.raises(tf.errors.InvalidArgumentError, match="lr must be finite"):
            tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(step=1, lr=float("inf"), **kwargs)
    np.testing.assert_array_equal(variables[0].numpy(), 1.0)


def test_the_path_is_chosen_automatically():
    var = tf.Variable(np.ones(2, np.float32))
    assert raw_ops.path_for(var) == raw_ops.FUSED
    seen = []

    @tf.function(jit_compile=True)
    def under_xla():
        seen.append(raw_ops.path_for(var))
        return tf.constant(0)

    under_xla()
    assert seen == [raw_ops.PORTABLE]
    on_gpu = type("OnGpu", (), {"device": "/job:localhost/replica:0/task:0/device:GPU:0"})()
    assert raw_ops.path_for(on_gpu) == raw_ops.PORTABLE
