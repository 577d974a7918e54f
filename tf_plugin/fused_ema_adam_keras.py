"""Keras 3 FusedEmaAdam on the fused op (flat state: one ResourceApplyMultiFusedEmaAdam call per dtype and step;
per-variable state: one ResourceApplyFusedEmaAdam call per variable). Public as tf_plugin.optimizers.FusedEmaAdam."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from op_spec import FUSED_EMA_ADAM, FUSED_EMA_ADAM_LR_DEFAULT
from op_spec.checks import check_attrs
from tf_plugin import keras_checks, raw_ops
from tf_plugin.flat_state import FlatStateMixin, dense_gradient, require_tensorflow_backend
from tf_plugin.pending_average import PendingAverageMixin, initialized
from tf_plugin.state_guards import StateGuardsMixin

_FEA = FUSED_EMA_ADAM.defaults
_MODES = {"l2": 0, "adamw": 1}


@keras.saving.register_keras_serializable(package="tf_plugin")
class FusedEmaAdam(PendingAverageMixin, StateGuardsMixin, FlatStateMixin, keras.optimizers.Optimizer):
    """Adam/AdamW fused with an EMA of the weights, on the op ``ResourceApplyFusedEmaAdam`` (GE ApplyFusedEmaAdam).

    With t = iterations + 1 and (c1, c2) = (1 - beta_1^t, 1 - beta_2^t) (or (1, 1) without bias correction):

        g = grad + weight_decay * var            (mode "l2" only)
        m = beta_1 * m + (1 - beta_1) * g;       v = beta_2 * v + (1 - beta_2) * g^2
        var -= lr * ((m / c1) / (sqrt(v / c2) + epsilon) [+ weight_decay * var_old in mode "adamw"])
        s = ema_decay * s + (1 - ema_decay) * var

    Slots: "m" and "v" start at zero; the EMA slot "s" starts as a copy of the variable, so the average begins at
    the initial weights. ``ema_variable(v)`` returns it; ``swap_ema_weights(vs)`` exchanges weights and averages.
    With flat state (the default) the slots of all variables of a dtype are one variable each (``m_float32``, ...),
    and ``ema_variable(v)`` returns v's EMA weights as a tensor.
    Note that epsilon is added to sqrt of the *corrected* v, as in PyTorch/CANN, not Keras Adam's "epsilon hat".

    Relation to Keras's ``use_ema``: the average is always kept (it is part of the fused op, decay
    ``ema_decay``), and no second average is run. ``use_ema=True`` only adds Keras's conventions on top of ``s``:
    ``fit()`` ends by overwriting the weights with ``s`` (``finalize_variable_values``), and
    ``ema_overwrite_frequency=N`` overwrites them every N iterations. Keras's ``ema_momentum`` is ``ema_decay``
    here (passing a different value is an error). Unlike Keras's average, ``s`` is not reset to the weights after
    the first step. Weight decay is fused too (Keras's separate decay pass is not run);
    ``exclude_from_weight_decay`` is honoured.

    Variables: float16, bfloat16 or float32 (the op's dtypes, op_spec); another dtype is refused at build, naming the
    variable. float16 variables need ``epsilon >= 1e-6``: v underflows to 0 for small gradients in float16, and the
    default 1e-8 then trains to NaN (build warns). A variable may appear once per ``apply_gradients`` call, in both
    layouts (stock Keras would apply the two gradients one after the other); a repeat is a ValueError naming it,
    and nothing is written. Each call's gradients are all checked before any is applied. The two ``flat_state``
    layouts store the slots differently: a checkpoint or weights file of one is refused by the other, naming
    flat_state, before any of the optimizer is restored. A model without ``keras.Input`` works as with it (the
    average of a variable made inside the first step is copied from it in that step).

    Args:
      learning_rate: a float, a LearningRateSchedule or a callable; fed to the op as a float32 tensor every step.
      beta_1, beta_2: the decays of m and v.  epsilon: added to the denominator.  ema_decay: the EMA's decay.
      weight_decay: decoupled (mode "adamw", GE mode 1) or folded into the gradient (mode "l2", GE mode 0).
      mode: "adamw" or "l2".  bias_correction: divide m and v by (1 - beta^t).
      flat_state: keep m, v, s in one flat variable per dtype and update with one op per dtype (default), or keep
        slots per variable and one op per variable (False).
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
        flat_state: bool = True,
        **kwargs,
    ):
        require_tensorflow_backend("FusedEmaAdam")
        scalars = {"beta_1": beta_1, "beta_2": beta_2, "epsilon": epsilon, "ema_decay": ema_decay,
                   "weight_decay": weight_decay}
        beta_1, beta_2, epsilon, ema_decay, weight_decay = (keras_checks.scalar_argument(k, v) for k, v in scalars.items())
        ema_momentum = kwargs.pop("ema_momentum", None)
        if ema_momentum is not None and keras_checks.scalar_argument("ema_momentum", ema_momentum) != ema_decay:
            raise ValueError(
                f"FusedEmaAdam's average uses ema_decay={ema_decay}; got ema_momentum={ema_momentum}. Pass the decay "
                "as ema_decay (there is one average, kept by the fused op)."
            )
        if mode not in _MODES:
            raise ValueError(f"mode must be 'adamw' or 'l2', got {mode!r}")
        # The base class must not run its own weight-decay pass: the op fuses it.
        super().__init__(learning_rate=learning_rate, name=name, weight_decay=None, **kwargs)
        self.flat_state = bool(flat_state)
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
        var_list = list(var_list)
        self._check_build(var_list)
        keras_checks.warn_float16_epsilon(type(self).__name__, var_list, self.epsilon)
        self._find_pending_averages(var_list)
        use_ema, self.use_ema = self.use_ema, False  # keep the base class from making a second average
        try:
            super().build(var_list)
        finally:
            self.use_ema = use_ema
        if self.flat_state:
            self._build_flat_state(var_list, {"s": _copy_of})
            self._decays = [self._use_weight_decay(v) for v in var_list]
            return
        self._momentums = self.add_optimizer_variables(var_list, "m")
        self._velocities = self.add_optimizer_variables(var_list, "v")
        self._averages = [self.add_variable_from_reference(var, "s", initializer=_copy_of([var])) for var in var_list]
        if use_ema:
            self._model_variables_moving_average = self._averages  # Keras's finalize/overwrite then use s

    flat_slot_names = ("m", "v", "s")
    per_variable_slot_attrs = ("_momentums", "_velocities", "_averages")
    op_signature = FUSED_EMA_ADAM

    def _flat_step_scalars(self, learning_rate):
        return {"lr": tf.cast(learning_rate, tf.float32), "step": tf.cast(self.iterations, tf.int64) + 1}

    def _apply_flat(self, flat, variables, grads, indices, state_offsets, scalars):
        with tf.control_dependencies(self._start_pending_flat(flat[2], grads[0].dtype.name)):
            return raw_ops.ResourceApplyMultiFusedEmaAdam(
                vars=variables, m=flat[0], v=flat[1], s=flat[2], grads=grads, step=scalars["step"],
                lr=scalars["lr"], ema_decay=self.ema_decay, beta1=self.beta_1, beta2=self.beta_2, eps=self.epsilon,
                mode=_MODES[self.mode], bias_correction=self.bias_correction, weight_decay=self.fused_weight_decay,
                no_decay=[k for k, i in enumerate(indices) if not self._decays[i]], state_offsets=state_offsets)

    def _overwrite_model_variables_with_average_value(self, trainable_variables):
        """Keras's use_ema conventions (finalize, ema_overwrite_frequency) on s."""
        if not self.flat_state:
            return super()._overwrite_model_variables_with_average_value(trainable_variables)
        for variable in trainable_variables:
            variable.assign(self.flat_slot("s", variable))

    def _update_model_variables_moving_average(self, trainable_variables):
        """The fused op already updated s in the same pass; nothing to do."""

    def _apply_weight_decay(self, variables):
        """Fused into the op."""

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        weight_decay = self.fused_weight_decay if self._use_weight_decay(variable) else 0.0
        with tf.control_dependencies(self._start_pending_variable(self._averages[index], variable, index)):
            raw_ops.ResourceApplyFusedEmaAdam(
                var=variable,
                m=self._momentums[index],
                v=self._velocities[index],
                s=self._averages[index],
                grad=tf.cast(dense_gradient(gradient), variable.dtype),
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

    def ema_variable(self, variable) -> keras.Variable | tf.Tensor:
        """The EMA weights of a model variable: its slot ``s`` (a Variable) with ``flat_state=False``, its part of
        the flat ``s`` (a tensor in the variable's shape, read now) with flat state. The slots exist once the
        optimizer is built: by the first ``apply_gradients`` or ``fit`` step, by ``swap_ema_weights``, or by
        ``opt.build(model.trainable_variables)``."""
        if not self.built:
            raise ValueError(
                "FusedEmaAdam has no EMA slots yet: they are built with the optimizer, for all its variables at once. "
                "Call opt.build(model.trainable_variables) first (fit and apply_gradients do it on the first step)."
            )
        if self.flat_state:
            return self.flat_slot("s", variable)
        return self._averages[self._get_variable_index(variable)]

    def swap_ema_weights(self, variables) -> None:
        """Exchanges the model weights and their EMA weights in place; call again to swap back. Builds the optimizer
        for `variables` when it is not built yet (the averages then start as copies of the weights)."""
        variables = list(variables)
        keras_checks.check_unique(type(self).__name__, variables, self._var_key)
        if not self.built:
            self.build(variables)
        if self.flat_state:
            self._swap_flat_slot("s", variables)
            return
        averages = [self.ema_variable(variable) for variable in variables]  # all known before any is swapped
        for variable, average in zip(variables, averages):
            weights = tf.identity(variable)
            variable.assign(average)
            average.assign(weights)

    def get_config(self):
        config = super().get_config()
        config.pop("weight_decay", None)
        config.update(
            beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon, ema_decay=self.ema_decay,
            weight_decay=self.fused_weight_decay, mode=self.mode, bias_correction=self.bias_correction,
            flat_state=self.flat_state,
        )
        return config


def _copy_of(variables) -> Callable:
    """A Keras initializer that returns the variables' current values (the EMA starts at the weights): the one
    variable's value, or several flattened and concatenated (flat state). A variable without a value yet (made in
    the step being traced) gives zeros, and the first step copies it (tf_plugin/pending_average.py)."""

    def initializer(shape, dtype=None):
        # Read eagerly, outside any function being traced: the initial value is then a constant that tf.function
        # (and XLA, which cannot run a variable's initializer inside the step) lifts out of the step.
        with tf.init_scope():
            if len(variables) == 1 and tuple(variables[0].shape) == tuple(shape) and initialized(variables[0]):
                return tf.identity(tf.convert_to_tensor(variables[0]))
            # A NumPy constant: XLA cannot lift a variable whose initial value is a concat of variable reads.
            return tf.constant(np.concatenate([_flat_value(v) for v in variables]).reshape(shape))

    return initializer


def _flat_value(variable) -> np.ndarray:
    if not initialized(variable):
        return np.zeros(int(np.prod(variable.shape)), tf.as_dtype(variable.dtype).as_numpy_dtype)
    return np.ravel(tf.convert_to_tensor(variable).numpy())
