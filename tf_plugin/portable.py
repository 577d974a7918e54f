"""The portable path: PowerSign and FusedEmaAdam made of stock TensorFlow ops, for where the fused CPU kernels
cannot run (inside XLA: jit_compile and Keras's "auto" on accelerators; variables on a GPU or TPU).

It follows the same spec as kernels/: float32 compute for float16/bfloat16 (float64 for float64 PowerSign), the
Ascend order of operations, one rounding at the store (a cast, round to nearest even), PowerSign's three scales
computed once per call, FusedEmaAdam's bias corrections in float64. It agrees with the fused kernels within 1 ulp
of T (XLA may contract a multiply and an add into one FMA); tests/tf_ops/test_portable.py checks every dtype.

Value rules that need the data (step >= 1 with bias correction, a finite lr) are asserted outside XLA; XLA has no
run-time errors, so there a bad step or lr shows as Inf/NaN in the result, as it would on the Ascend device.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import control_flow_util, resource_variable_ops, state_ops


def in_xla_context() -> bool:
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def _compute_dtype(dtype: tf.DType) -> tf.DType:
    return tf.float64 if dtype == tf.float64 else tf.float32


def _signbit(x: tf.Tensor) -> tf.Tensor:
    int_type = tf.int64 if x.dtype == tf.float64 else tf.int32
    return tf.bitcast(x, int_type) < 0


def _scalar(x: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    return tf.cast(tf.reshape(x, []), dtype)


class _State:
    """Reads and writes the state inputs, resource handles or ref variables."""

    def __init__(self, refs: dict[str, Any], dtype: tf.DType, resource: bool):
        self.refs, self.dtype, self.resource = refs, dtype, resource

    def read(self, name: str, compute: tf.DType) -> tf.Tensor:
        ref = self.refs[name]
        value = resource_variable_ops.read_variable_op(ref, self.dtype) if self.resource else tf.identity(ref)
        return tf.cast(value, compute)

    def write(self, values: dict[str, tf.Tensor], use_locking: bool):
        ops = []
        for name, value in values.items():
            value = tf.cast(value, self.dtype)
            if self.resource:
                ops.append(resource_variable_ops.assign_variable_op(self.refs[name], value))
            else:
                ops.append(state_ops.assign(self.refs[name], value, use_locking=use_locking))
        return ops


def power_sign(refs: dict[str, Any], dtype: tf.DType, resource: bool, lr, logbase, sign_decay, beta, grad,
               use_locking: bool):
    """PowerSign with stock ops; returns the updated var (ref) or the assign op (resource)."""
    c = _compute_dtype(dtype)
    state = _State(refs, dtype, resource)
    lr, logbase, sign_decay, beta = (_scalar(x, c) for x in (lr, logbase, sign_decay, beta))
    g = tf.cast(grad, c)
    m_t = beta * state.read("m", c) + (tf.constant(1, c) - beta) * g
    k = logbase * sign_decay
    neg, zero, pos = tf.exp(k * tf.constant(-1, c)), tf.exp(k * tf.constant(0, c)), tf.exp(k)
    finite = tf.reduce_all(tf.math.is_finite(tf.stack([neg, zero, pos])))
    scale = tf.where(tf.math.logical_xor(_signbit(m_t), _signbit(g)), neg, pos)
    scale = tf.where(finite, scale, tf.where(tf.equal(g, 0), zero, scale))
    scale = tf.where(tf.equal(m_t, 0) | tf.math.is_nan(m_t), m_t + zero, scale)
    var_t = state.read("var", c) - (scale * g) * lr
    ops = state.write({"m": m_t, "var": var_t}, use_locking)
    if resource:
        return tf.group(*ops)
    with tf.control_dependencies(ops):
        return tf.identity(refs["var"])


def _f32(x: float) -> float:
    return float(np.float32(x))


def fused_ema_adam(refs: dict[str, Any], dtype: tf.DType, resource: bool, grad, step, lr, attrs: dict,
                   use_locking: bool):
    """FusedEmaAdam with stock ops; returns the updated var (ref) or the assign op (resource)."""
    f32 = tf.float32
    state = _State(refs, dtype, resource)
    b1, b2, ema, wd, eps = (_f32(attrs[k]) for k in ("beta1", "beta2", "ema_decay", "weight_decay", "eps"))
    step = tf.reshape(step, [])
    lr = tf.reshape(lr, [])
    checks = []
    if not in_xla_context():
        if attrs["bias_correction"]:
            checks.append(tf.debugging.assert_greater_equal(
                step, tf.constant(1, tf.int64), message="step must be >= 1 when bias_correction is true"))
        checks.append(tf.debugging.assert_all_finite(lr, message="lr must be finite"))
    with tf.control_dependencies(checks):
        if attrs["bias_correction"]:
            t = tf.cast(step, tf.float64)
            inv_c1 = tf.cast(1.0 / (1.0 - tf.pow(tf.constant(b1, tf.float64), t)), f32)
            inv_c2 = tf.cast(1.0 / (1.0 - tf.pow(tf.constant(b2, tf.float64), t)), f32)
        else:
            inv_c1 = inv_c2 = tf.constant(1.0, f32)
        w = state.read("var", f32)
        g = tf.cast(grad, f32)
        if attrs["mode"] == 0:
            g = g + w * wd
        m_out = state.read("m", f32) * b1 + g * np.float32(np.float32(1) - np.float32(b1))
        v_out = state.read("v", f32) * b2 + (g * g) * np.float32(np.float32(1) - np.float32(b2))
        update = (m_out * inv_c1) / (tf.sqrt(v_out * inv_c2) + eps)
        if attrs["mode"] == 1:
            update = update + w * wd
        var_out = w - update * lr
        s_out = state.read("s", f32) * ema + var_out * np.float32(np.float32(1) - np.float32(ema))
        ops = state.write({"m": m_out, "v": v_out, "var": var_out, "s": s_out}, use_locking)
    if resource:
        return tf.group(*ops)
    with tf.control_dependencies(ops):
        return tf.identity(refs["var"])
