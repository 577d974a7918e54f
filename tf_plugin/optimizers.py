"""Keras 3 optimizers on tf_plugin's fused ops: ``PowerSign`` and ``FusedEmaAdam``.

Each update is one call of our resource op per variable (no per-element Python math). Sparse gradients
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

from op_spec import FUSED_EMA_ADAM, FUSED_EMA_ADAM_LR_DEFAULT
from op_spec.checks import check_attrs
from tf_plugin import raw_ops
from tf_plugin import sign_decay as sign_decay_lib

_FEA = FUSED_EMA_ADAM.defaults
_MODES = {"l2": 0, "adamw": 1}


def _require_tensorflow_backend(name: str) -> None:
    if keras.backend.backend() != "tensorflow":
        raise ValueError(
            f"tf_plugin's {name} runs TensorFlow ops, but Keras uses the {keras.backend.backend()!r} backend; set "
            "KERAS_BACKEND=tensorflow before importing Keras."
        )


def _dense(gradient: Any) -> tf.Tensor:
    return tf.convert_to_tensor(gradient) if isinstance(gradient, tf.IndexedSlices) else gradient


@keras.saving.register_keras_serializable(package="tf_plugin")
class PowerSign(keras.optimizers.Optimizer):
    """PowerSign (Bello et al., 2017) on the fused op ``ResourceApplyPowerSign``.

    m_t = beta * m + (1 - beta) * g
    var -= lr * base ** (sign_decay(t - 1) * sign(m_t) * sign(g)) * g

    Args:
      learning_rate: a float, a ``keras.optimizers.schedules.LearningRateSchedule`` or a callable.
      base: the base of the sign-agreement factor (> 0); the op gets ``logbase = log(base)``.
      beta: the decay of the gradient's moving average m (the slot "m", starting at zero).
      sign_decay: None (constant 1), a callable ``fn(step) -> scalar`` or "linear", "cosine", "restart" (the
        ``tf_plugin.sign_decay`` schedules, which then need ``decay_steps``). It is evaluated at the iteration
        count before the update (0 at the first update), as tf.contrib's PowerSignOptimizer does.
      decay_steps: the length of a named sign-decay schedule.
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
        **kwargs,
    ):
        _require_tensorflow_backend("PowerSign")
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        if not base > 0:
            raise ValueError(f"base must be > 0, got {base!r}")
        self.base, self.beta, self.decay_steps = float(base), float(beta), decay_steps
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
        super().build(var_list)
        self._momentums = self.add_optimizer_variables(var_list, "m")

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
            grad=tf.cast(_dense(gradient), dtype),
        )

    def get_config(self):
        config = super().get_config()
        sign_decay = self.sign_decay
        if callable(sign_decay):
            sign_decay = keras.saving.serialize_keras_object(sign_decay)
        config.update(base=self.base, beta=self.beta, sign_decay=sign_decay, decay_steps=self.decay_steps)
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        if isinstance(config.get("sign_decay"), dict):
            config["sign_decay"] = keras.saving.deserialize_keras_object(
                config["sign_decay"], custom_objects=custom_objects
            )
        return super().from_config(config, custom_objects=custom_objects)


@keras.saving.register_keras_serializable(package="tf_plugin")
class FusedEmaAdam(keras.optimizers.Optimizer):
    """Adam/AdamW fused with an EMA of the weights, on the op ``ResourceApplyFusedEmaAdam`` (GE ApplyFusedEmaAdam).

    With t = iterations + 1 and (c1, c2) = (1 - beta_1^t, 1 - beta_2^t) (or (1, 1) without bias correction):

        g = grad + weight_decay * var            (mode "l2" only)
        m = beta_1 * m + (1 - beta_1) * g;       v = beta_2 * v + (1 - beta_2) * g^2
        var -= lr * ((m / c1) / (sqrt(v / c2) + epsilon) [+ weight_decay * var_old in mode "adamw"])
        s = ema_decay * s + (1 - ema_decay) * var

    Slots: "m" and "v" start at zero; the EMA slot "s" starts as a copy of the variable, so the average begins at
    the initial weights. ``ema_variable(v)`` returns it; ``swap_ema_weights(vs)`` exchanges weights and averages.
    Note that epsilon is added to sqrt of the *corrected* v, as in PyTorch/CANN, not Keras Adam's "epsilon hat".

    Relation to Keras's ``use_ema``: the average is always kept (it is part of the fused op, decay
    ``ema_decay``), and no second average is run. ``use_ema=True`` only adds Keras's conventions on top of ``s``:
    ``fit()`` ends by overwriting the weights with ``s`` (``finalize_variable_values``), and
    ``ema_overwrite_frequency=N`` overwrites them every N iterations. Keras's ``ema_momentum`` is ``ema_decay``
    here (passing a different value is an error). Unlike Keras's average, ``s`` is not reset to the weights after
    the first step. Weight decay is fused too (Keras's separate decay pass is not run);
    ``exclude_from_weight_decay`` is honoured.

    Args:
      learning_rate: a float, a LearningRateSchedule or a callable; fed to the op as a float32 tensor every step.
      beta_1, beta_2: the decays of m and v.  epsilon: added to the denominator.  ema_decay: the EMA's decay.
      weight_decay: decoupled (mode "adamw", GE mode 1) or folded into the gradient (mode "l2", GE mode 0).
      mode: "adamw" or "l2".  bias_correction: divide m and v by (1 - beta^t).
    """

    def __init__(
        self,
        learning_rate: Any = FUSED_EMA_ADAM_LR_DEFAULT,
        beta_1: float = _FEA["beta1"],
        beta_2: float = _FEA["beta2"],
        epsilon: float = _FEA["eps"],
        ema_decay: float = _FEA["ema_decay"],
        weight_decay: float = _FEA["weight_decay"],
        mode: str = "adamw",
        bias_correction: bool = _FEA["bias_correction"],
        name: str = "fused_ema_adam",
        **kwargs,
    ):
        _require_tensorflow_backend("FusedEmaAdam")
        ema_momentum = kwargs.pop("ema_momentum", None)
        if ema_momentum is not None and float(ema_momentum) != float(ema_decay):
            raise ValueError(
                f"FusedEmaAdam's average uses ema_decay={ema_decay}; got ema_momentum={ema_momentum}. Pass the decay "
                "as ema_decay (there is one average, kept by the fused op)."
            )
        if mode not in _MODES:
            raise ValueError(f"mode must be 'adamw' or 'l2', got {mode!r}")
        # The base class must not run its own weight-decay pass: the op fuses it.
        super().__init__(learning_rate=learning_rate, name=name, weight_decay=None, **kwargs)
        self.ema_momentum = float(ema_decay)
        self.beta_1, self.beta_2, self.epsilon = float(beta_1), float(beta_2), float(epsilon)
        self.ema_decay, self.fused_weight_decay = float(ema_decay), float(weight_decay)
        self.mode, self.bias_correction = mode, bool(bias_correction)
        # Attribute ranges are the op's; check them now rather than at the first step.
        check_attrs(
            FUSED_EMA_ADAM, {"beta1": beta_1, "beta2": beta_2, "ema_decay": ema_decay, "eps": epsilon, "weight_decay": weight_decay},
            shown_as={"beta1": "beta_1", "beta2": "beta_2", "eps": "epsilon"})

    def build(self, var_list):
        if self.built:
            return
        use_ema, self.use_ema = self.use_ema, False  # keep the base class from making a second average
        try:
            super().build(var_list)
        finally:
            self.use_ema = use_ema
        self._momentums = self.add_optimizer_variables(var_list, "m")
        self._velocities = self.add_optimizer_variables(var_list, "v")
        self._averages = [
            self.add_variable_from_reference(var, "s", initializer=_copy_of(var)) for var in var_list
        ]
        if use_ema:
            self._model_variables_moving_average = self._averages  # Keras's finalize/overwrite then use s

    def _update_model_variables_moving_average(self, trainable_variables):
        """The fused op already updated s in the same pass; nothing to do."""

    def _apply_weight_decay(self, variables):
        """Fused into the op."""

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        weight_decay = self.fused_weight_decay if self._use_weight_decay(variable) else 0.0
        raw_ops.ResourceApplyFusedEmaAdam(
            var=variable,
            m=self._momentums[index],
            v=self._velocities[index],
            s=self._averages[index],
            grad=tf.cast(_dense(gradient), variable.dtype),
            step=tf.cast(self.iterations, tf.int64) + 1,
            lr=tf.cast(learning_rate, tf.float32),
            ema_decay=self.ema_decay,
            beta1=self.beta_1,
            beta2=self.beta_2,
            eps=self.epsilon,
            mode=_MODES[self.mode],
            bias_correction=self.bias_correction,
            weight_decay=weight_decay,
        )

    def ema_variable(self, variable) -> keras.Variable:
        """The EMA slot ``s`` of a model variable. The slots exist once the optimizer is built: by the first
        ``apply_gradients`` or ``fit`` step, by ``swap_ema_weights``, or by ``opt.build(model.trainable_variables)``."""
        if not self.built:
            raise ValueError(
                "FusedEmaAdam has no EMA slots yet: they are built with the optimizer, for all its variables at once. "
                "Call opt.build(model.trainable_variables) first (fit and apply_gradients do it on the first step)."
            )
        return self._averages[self._get_variable_index(variable)]

    def swap_ema_weights(self, variables) -> None:
        """Exchanges the model weights and their EMA weights in place; call again to swap back. Builds the optimizer
        for `variables` when it is not built yet (the averages then start as copies of the weights)."""
        variables = list(variables)
        if not self.built:
            self.build(variables)
        for variable in variables:
            average = self.ema_variable(variable)
            weights = tf.identity(variable)
            variable.assign(average)
            average.assign(weights)

    def get_config(self):
        config = super().get_config()
        config.pop("weight_decay", None)
        config.update(
            beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon, ema_decay=self.ema_decay,
            weight_decay=self.fused_weight_decay, mode=self.mode, bias_correction=self.bias_correction,
        )
        return config


def _copy_of(variable) -> Callable:
    """A Keras initializer that returns the variable's current value (the EMA starts at the weights)."""

    def initializer(shape, dtype=None):
        # Read eagerly, outside any function being traced: the initial value is then a constant that tf.function
        # (and XLA, which cannot run a variable's initializer inside the step) lifts out of the step.
        with tf.init_scope():
            return tf.identity(tf.convert_to_tensor(variable))

    return initializer
