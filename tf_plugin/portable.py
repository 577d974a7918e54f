"""The portable path: PowerSign and FusedEmaAdam made of stock TensorFlow ops, for where the fused CPU kernels
cannot run (inside XLA: jit_compile and Keras's "auto" on accelerators; variables on a GPU or TPU).

It follows the same spec as kernels/: float32 compute for float16/bfloat16 (float64 for float64 PowerSign), the
Ascend order of operations, one rounding at the store (a cast, round to nearest even), PowerSign's three scales
computed once per call, FusedEmaAdam's bias corrections in float64. Eagerly it is bitwise the fused kernels. In a
tf.function or XLA (which contracts a multiply and an add into one FMA) it stays within 1 ulp of T for float16 and
bfloat16, and within 4 ulps of T times the operands' size for float32 and float64: where terms cancel, that is more
ulps of the result itself (up to 5 for float32 and 27 for float64 measured). tests/tf_ops/test_portable.py checks
every dtype.

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


def _finish(state: _State, values: dict[str, tf.Tensor], use_locking: bool):
    ops = state.write(values, use_locking)
    if state.resource:
        return tf.group(*ops)
    with tf.control_dependencies(ops):
        return tf.identity(state.refs["var"])


def power_sign(refs: dict[str, Any], dtype: tf.DType, resource: bool, lr, logbase, sign_decay, beta, grad,
               use_locking: bool):
    """PowerSign with stock ops; returns the updated var (ref) or the assign op (resource)."""
    state = _State(refs, dtype, resource)
    return _finish(state, power_sign_values(state.read, dtype, lr, logbase, sign_decay, beta, grad), use_locking)


def power_sign_values(read, dtype: tf.DType, lr, logbase, sign_decay, beta, grad) -> dict[str, tf.Tensor]:
    """The new m and var (in the compute dtype); read(name, compute_dtype) gives the current state."""
    c = _compute_dtype(dtype)
    lr, logbase, sign_decay, beta = (_scalar(x, c) for x in (lr, logbase, sign_decay, beta))
    g = tf.cast(grad, c)
    m_t = beta * read("m", c) + (tf.constant(1, c) - beta) * g
    k = logbase * sign_decay
    neg, zero, pos = tf.exp(k * tf.constant(-1, c)), tf.exp(k * tf.constant(0, c)), tf.exp(k)
    finite = tf.reduce_all(tf.math.is_finite(tf.stack([neg, zero, pos])))
    scale = tf.where(tf.math.logical_xor(_signbit(m_t), _signbit(g)), neg, pos)
    scale = tf.where(finite, scale, tf.where(tf.equal(g, 0), zero, scale))
    scale = tf.where(tf.equal(m_t, 0) | tf.math.is_nan(m_t), m_t + zero, scale)
    return {"m": m_t, "var": read("var", c) - (scale * g) * lr}


def _f32(x: float) -> float:
    return float(np.float32(x))


def fused_ema_adam(refs: dict[str, Any], dtype: tf.DType, resource: bool, grad, step, lr, attrs: dict,
                   use_locking: bool):
    """FusedEmaAdam with stock ops; returns the updated var (ref) or the assign op (resource)."""
    state = _State(refs, dtype, resource)
    with tf.control_dependencies(fused_ema_adam_checks(step, lr, attrs)):
        return _finish(state, fused_ema_adam_values(state.read, grad, step, lr, attrs), use_locking)


def fused_ema_adam_checks(step, lr, attrs: dict) -> list:
    """The run-time rules (step >= 1 with bias correction, a finite lr) as assertions; none inside XLA."""
    if in_xla_context():
        return []
    checks = []
    if attrs["bias_correction"]:
        checks.append(tf.debugging.assert_greater_equal(
            tf.reshape(step, []), tf.constant(1, tf.int64), message="step must be >= 1 when bias_correction is true"))
    checks.append(tf.debugging.assert_all_finite(tf.reshape(lr, []), message="lr must be finite"))
    return checks


def fused_ema_adam_values(read, grad, step, lr, attrs: dict) -> dict[str, tf.Tensor]:
    """The new m, v, var and s (float32); read(name, compute_dtype) gives the current state."""
    f32 = tf.float32
    b1, b2, ema, wd, eps = (_f32(attrs[k]) for k in ("beta1", "beta2", "ema_decay", "weight_decay", "eps"))
    step = tf.reshape(step, [])
    lr = tf.reshape(lr, [])
    if attrs["bias_correction"]:
        t = tf.cast(step, tf.float64)
        inv_c1 = tf.cast(1.0 / (1.0 - tf.pow(tf.constant(b1, tf.float64), t)), f32)
        inv_c2 = tf.cast(1.0 / (1.0 - tf.pow(tf.constant(b2, tf.float64), t)), f32)
    else:
        inv_c1 = inv_c2 = tf.constant(1.0, f32)
    w = read("var", f32)
    g = tf.cast(grad, f32)
    if attrs["mode"] == 0:
        g = g + w * wd
    m_out = read("m", f32) * b1 + g * np.float32(np.float32(1) - np.float32(b1))
    v_out = read("v", f32) * b2 + (g * g) * np.float32(np.float32(1) - np.float32(b2))
    update = (m_out * inv_c1) / (tf.sqrt(v_out * inv_c2) + eps)
    if attrs["mode"] == 1:
        update = update + w * wd
    var_out = w - update * lr
    s_out = read("s", f32) * ema + var_out * np.float32(np.float32(1) - np.float32(ema))
    return {"m": m_out, "v": v_out, "var": var_out, "s": s_out}


def multi_tensor(values, variables: list, flat: dict[str, Any], grads: list, dtype: tf.DType, state_offsets=()):
    """A multi-tensor op with stock ops: values(k, read, grad) gives variable k's new state, read from its slice of
    each flat variable in `flat` (name -> handle); every variable and flat variable is assigned once. With
    `state_offsets` (static sizes needed), variable k's state starts there; elements no variable owns are kept."""
    shapes = [tf.shape(g) for g in grads]
    if state_offsets:
        sizes = [g.shape.num_elements() for g in grads]
        if None in sizes:
            raise ValueError("state_offsets on the portable path needs gradients of static shape")
        starts = list(state_offsets)
    else:
        sizes = [tf.size(g) for g in grads]
    flat_now = {n: resource_variable_ops.read_variable_op(h, dtype) for n, h in flat.items()}
    if state_offsets:
        pieces = {n: [x[a:a + size] for a, size in zip(starts, sizes)] for n, x in flat_now.items()}
    else:
        pieces = {n: tf.split(x, sizes) for n, x in flat_now.items()}
    new: dict[str, list] = {n: [] for n in flat}
    ops = []
    for k, (var, grad) in enumerate(zip(variables, grads)):
        def read(name, compute, var=var, k=k):
            if name == "var":
                return tf.cast(resource_variable_ops.read_variable_op(var, dtype), compute)
            return tf.cast(tf.reshape(pieces[name][k], shapes[k]), compute)

        out = values(k, read, grad)
        ops.append(resource_variable_ops.assign_variable_op(var, tf.cast(out["var"], dtype)))
        for n in flat:
            new[n].append(tf.reshape(tf.cast(out[n], dtype), [-1]))
    with tf.control_dependencies(ops):  # every slice read before the flat state is written
        for n, h in flat.items():
            if state_offsets:
                order = sorted(range(len(starts)), key=starts.__getitem__)
                parts, at = [], 0
                for k in order:
                    parts += [flat_now[n][at:starts[k]], new[n][k]]
                    at = starts[k] + sizes[k]
                value = tf.concat([*parts, flat_now[n][at:]], 0)
            else:
                value = tf.concat(new[n], 0)
            ops.append(resource_variable_ops.assign_variable_op(h, value))
    return tf.group(*ops)
