"""Keras 3 optimizers on tf_plugin's fused ops: ``PowerSign`` and ``FusedEmaAdam``.

By default (``flat_state=True``) the optimizer state lives in one flat variable per dtype and slot (``m_float32``,
``v_float32``, ``s_float32``, ...), every variable's slot concatenated in build order, and a step is one multi-tensor
op call per dtype (tf_plugin/flat_state.py). ``flat_state=False`` keeps one slot variable per model variable and one
single-tensor op call per variable (the 0.1 layout, for checkpoints written by it). Sparse gradients
(``tf.IndexedSlices``, e.g. from an Embedding) are densified first; for PowerSign that is exactly tf.contrib's sparse
semantics (m decays on every row, var moves only where the gradient is non-zero). Under XLA (``jit_compile=True``,
Keras's ``"auto"`` on accelerators) and for variables on a GPU or TPU, the raw ops run their portable path of stock
TF ops with the same numerics (tf_plugin/portable.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf

from op_spec import POWER_SIGN
from tf_plugin import keras_checks, raw_ops
from tf_plugin import sign_decay as sign_decay_lib
from tf_plugin.flat_state import FlatStateMixin, dense_gradient, require_tensorflow_backend
from tf_plugin.fused_ema_adam_keras import FusedEmaAdam
from tf_plugin.state_guards import StateGuardsMixin

__all__ = ["FusedEmaAdam", "PowerSign"]


@keras.saving.register_keras_serializable(package="tf_plugin")
class PowerSign(StateGuardsMixin, FlatStateMixin, keras.optimizers.Optimizer):
    """PowerSign (Bello et al., 2017) on the fused op ``ResourceApplyPowerSign``.

    m_t = beta * m + (1 - beta) * g
    var -= lr * base ** (sign_decay(t - 1) * sign(m_t) * sign(g)) * g

    Variables: float16, bfloat16, float32 or float64 (the op's dtypes, op_spec); another dtype is refused at build.
    A variable may appear once per ``apply_gradients`` call, in both layouts (a repeat is a ValueError naming it;
    nothing is written), and a checkpoint or weights file of the other ``flat_state`` layout is refused, naming
    flat_state, before any of the optimizer is restored.

    Args:
      learning_rate: a float, a ``keras.optimizers.schedules.LearningRateSchedule`` or a callable.
      base: the base of the sign-agreement factor (> 0); the op gets ``logbase = log(base)``.
      beta: the decay of the gradient's moving average m (the slot "m", starting at zero).
      sign_decay: None (constant 1), a callable ``fn(step) -> scalar`` or "linear", "cosine", "restart" (the
        ``tf_plugin.sign_decay`` schedules, which then need ``decay_steps``). It is evaluated at the iteration
        count before the update (0 at the first update), as tf.contrib's PowerSignOptimizer does.
      decay_steps: the length of a named sign-decay schedule.
      flat_state: keep m in one flat variable per dtype and update with one op per dtype (default), or keep one
        slot per variable and one op per variable (False).
      **kwargs: the base Keras optimizer's arguments (clipnorm, use_ema, ...).
    """

    def __init__(
        self,
        learning_rate: Any = 0.1,
        base: float = math.e,
        beta: float = 0.9,
        sign_decay: str | Callable | None = None,
        name: str = "powersign",
        *,
        decay_steps: int | None = None,
        flat_state: bool = True,
        **kwargs,
    ):
        require_tensorflow_backend("PowerSign")
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.flat_state = bool(flat_state)
        base, beta = keras_checks.scalar_argument("base", base), keras_checks.scalar_argument("beta", beta)
        if not base > 0:
            raise ValueError(f"base must be > 0, got {base!r}")
        self.base, self.beta, self.decay_steps = base, beta, decay_steps
        self.sign_decay = sign_decay
        if sign_decay is None or callable(sign_decay):
            self._sign_decay_fn = sign_decay
        elif isinstance(sign_decay, str):
            self._sign_decay_fn = sign_decay_lib.by_name(sign_decay, decay_steps)
        else:
            raise ValueError(f"sign_decay must be None, a callable or a schedule name, got {sign_decay!r}")

    def build(self, var_list):
        if self.built:
            return
        var_list = list(var_list)
        self._check_build(var_list)
        super().build(var_list)
        if self.flat_state:
            self._build_flat_state(var_list, {})
        else:
            self._momentums = self.add_optimizer_variables(var_list, "m")

    flat_slot_names = ("m",)
    per_variable_slot_attrs = ("_momentums",)
    op_signature = POWER_SIGN

    def _flat_step_scalars(self, learning_rate):
        return {"lr": learning_rate, "sign_decay": self._sign_decay_at_iterations()}

    def _apply_flat(self, flat, variables, grads, indices, state_offsets, scalars):
        dtype = grads[0].dtype
        return raw_ops.ResourceApplyMultiPowerSign(
            vars=variables, m=flat[0], lr=tf.cast(scalars["lr"], dtype), logbase=tf.cast(math.log(self.base), dtype),
            sign_decay=tf.cast(scalars["sign_decay"], dtype), beta=tf.cast(self.beta, dtype), grads=grads,
            state_offsets=state_offsets)

    def _sign_decay_at_iterations(self) -> tf.Tensor | float:
        if self._sign_decay_fn is None:
            return 1.0
        return self._sign_decay_fn(self.iterations)

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        m = self._momentums[self._get_variable_index(variable)]
        raw_ops.ResourceApplyPowerSign(
            var=variable,
            m=m,
            lr=tf.cast(learning_rate, dtype),
            logbase=tf.cast(math.log(self.base), dtype),
            sign_decay=tf.cast(self._sign_decay_at_iterations(), dtype),
            beta=tf.cast(self.beta, dtype),
            grad=tf.cast(dense_gradient(gradient), dtype),
        )

    def get_config(self):
        config = super().get_config()
        sign_decay = self.sign_decay
        if callable(sign_decay):
            sign_decay = keras.saving.serialize_keras_object(sign_decay)
        config.update(base=self.base, beta=self.beta, sign_decay=sign_decay, decay_steps=self.decay_steps,
                      flat_state=self.flat_state)
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        if isinstance(config.get("sign_decay"), dict):
            config["sign_decay"] = keras.saving.deserialize_keras_object(
                config["sign_decay"], custom_objects=custom_objects
            )
        return super().from_config(config, custom_objects=custom_objects)
