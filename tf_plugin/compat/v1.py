"""TF1 optimizers (``tf.compat.v1.train.Optimizer``) on tf_plugin's ops, for ref and resource variables.

``PowerSignOptimizer`` has tf.contrib.opt.PowerSignOptimizer's API and semantics. Both optimizers use
``global_step``, when ``apply_gradients`` is given one, as the iteration count (read before the base class
increments it); without it they keep their own count in a non-slot variable "iterations". Sparse gradients
(``tf.IndexedSlices``) are densified (duplicate indices summed) and take the dense path; for PowerSign that equals
tf.contrib's sparse update (m decays on every row, var moves only on rows with a non-zero gradient).

``flat_state=True`` (resource variables) keeps the slots in one flat variable per dtype and slot name and runs one
multi-tensor op per dtype and step (tf_plugin/compat/flat_v1.py); ``get_slot`` then returns tensors. The default
keeps TF1's per-variable slot Variables, which TF1 code loads, saves and reads by variable.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import tensorflow as tf

from op_spec import FUSED_EMA_ADAM, FUSED_EMA_ADAM_LR_DEFAULT
from tf_plugin import raw_ops
from tf_plugin.compat.flat_v1 import FlatV1Mixin, _graph_key, densify
from tf_plugin.pending_average import copy_into_flat, initialized, when

_FEA = FUSED_EMA_ADAM.defaults


class _CountingOptimizer(FlatV1Mixin, tf.compat.v1.train.Optimizer):
    """Exposes the iteration count (global_step, or our own) to the update as ``self._step_count``; with flat state,
    runs the step's multi-tensor ops instead of the base class's per-variable updates."""

    def __init__(self, use_locking: bool, name: str, flat_state: bool):
        super().__init__(use_locking, name)
        self._flat_state = bool(flat_state)
        self._flat_built: dict = {}

    def get_slot(self, var, name):
        if self._flat_state:
            return self.flat_slot(var, name)
        return super().get_slot(var, name)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = tuple(grads_and_vars)
        var_list = [v for g, v in grads_and_vars if g is not None]
        if global_step is None:
            with tf.init_scope():
                first = min(var_list, key=lambda v: v.name) if var_list else None
                counter = self._create_non_slot_variable(
                    initial_value=tf.constant(0, tf.int64), name="iterations", colocate_with=first
                )
            self._own_counter = counter
            self._step_count = tf.identity(counter) if tf.executing_eagerly() else counter.read_value()
        else:
            self._own_counter = None
            self._step_count = tf.convert_to_tensor(global_step)
        self._prepare_step()
        if not self._flat_state:
            return super().apply_gradients(grads_and_vars, global_step=global_step, name=name)
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            raise ValueError(f"No gradients provided for any variable: {[v.name for _, v in grads_and_vars]}")
        with tf.name_scope(name or self._name):
            finish = self._finish(self._apply_flat_gradients(pairs), "update")
            if global_step is None:
                return finish
            with tf.control_dependencies([finish]):
                return global_step.assign_add(1, read_value=False)

    def _prepare_step(self) -> None:
        """Called with ``self._step_count`` set, before the updates are built."""

    def _finish(self, update_ops, name_scope):
        if self._own_counter is None:
            return super()._finish(update_ops, name_scope)
        with tf.control_dependencies(update_ops):
            return tf.group(self._own_counter.assign_add(1), name=name_scope)

    def _apply_sparse_duplicate_indices(self, grad, var):
        return self._apply_dense(densify(grad.values, grad.indices, var), var)

    def _resource_apply_sparse_duplicate_indices(self, grad, handle, indices, **kwargs):
        return self._resource_apply_dense(densify(grad, indices, handle), handle)


class PowerSignOptimizer(_CountingOptimizer):
    """tf.contrib.opt.PowerSignOptimizer on our fused op.

    m_t = beta * m + (1 - beta) * g;   var -= lr * exp(logbase * sign_decay * sign(m_t) * sign(g)) * g,
    with logbase = log(base) and sign_decay = sign_decay_fn(step) at the iteration count before the update
    (1 without a decay function).

    Args:
      learning_rate: a float or a scalar tensor.   base: the base of the sign factor (> 0).
      beta: the decay of the slot "m".   sign_decay_fn: ``fn(global_step) -> scalar`` (see tf_plugin.sign_decay).
      use_locking: lock the variables during the update.   name: the optimizer's name.
      flat_state: one flat "m_<dtype>" per dtype and one multi-tensor op per step (resource variables).
    """

    flat_slot_names = ("m",)

    def __init__(
        self,
        learning_rate: float = 0.1,
        base: float = math.e,
        beta: float = 0.9,
        sign_decay_fn: Callable | None = None,
        use_locking: bool = False,
        name: str = "PowerSign",
        flat_state: bool = False,
    ):
        super().__init__(use_locking, name, flat_state)
        if not base > 0:
            raise ValueError(f"base must be > 0, got {base!r}")
        self._lr, self._beta, self._logbase = learning_rate, beta, math.log(base)
        self._sign_decay_fn = sign_decay_fn

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "m", self._name)

    def _prepare_step(self):
        decay = 1.0 if self._sign_decay_fn is None else self._sign_decay_fn(self._step_count)
        self._sign_decay_t = tf.convert_to_tensor(decay, name="sign_decay")

    def _scalars(self, dtype) -> dict:
        return {
            "lr": tf.cast(self._lr, dtype),
            "logbase": tf.cast(self._logbase, dtype),
            "sign_decay": tf.cast(self._sign_decay_t, dtype),
            "beta": tf.cast(self._beta, dtype),
        }

    def _apply_dense(self, grad, var):
        return raw_ops.ApplyPowerSign(
            var=var, m=self.get_slot(var, "m"), grad=grad, use_locking=self._use_locking,
            **self._scalars(var.dtype.base_dtype),
        )

    def _flat_initial(self, name, variables):
        return None

    def _apply_flat(self, flat, variables, grads, state_offsets, dtype):
        return raw_ops.ResourceApplyMultiPowerSign(vars=variables, m=flat[0], grads=grads, use_locking=self._use_locking,
                                                   state_offsets=state_offsets, **self._scalars(tf.as_dtype(dtype)))

    def _resource_apply_dense(self, grad, handle):
        return raw_ops.ResourceApplyPowerSign(
            var=handle.handle, m=self.get_slot(handle, "m").handle, grad=grad, use_locking=self._use_locking,
            **self._scalars(grad.dtype.base_dtype),
        )


class FusedEmaAdamOptimizer(_CountingOptimizer):
    """Adam/AdamW fused with an EMA of the weights (GE ApplyFusedEmaAdam); see tf_plugin.raw_ops for the formula.

    step = iterations + 1 (iterations = global_step when given). Slots: "m" and "v" (zeros) and "s", the EMA,
    which starts as a copy of the variable; ``get_slot(var, "s")`` is the averaged weight.

    Args: as ``tf_plugin.raw_ops.ApplyFusedEmaAdam`` (mode 1 = AdamW, 0 = L2), plus learning_rate (a float or a
    scalar tensor, fed to the op as a float32 tensor), use_locking, name and flat_state (one flat "m_<dtype>",
    "v_<dtype>", "s_<dtype>" per dtype and one multi-tensor op per step; resource variables).
    """

    flat_slot_names = ("m", "v", "s")

    def __init__(
        self,
        learning_rate: float = FUSED_EMA_ADAM_LR_DEFAULT,
        beta1: float = _FEA["beta1"],
        beta2: float = _FEA["beta2"],
        epsilon: float = _FEA["eps"],
        ema_decay: float = _FEA["ema_decay"],
        weight_decay: float = _FEA["weight_decay"],
        mode: int = _FEA["mode"],
        bias_correction: bool = _FEA["bias_correction"],
        use_locking: bool = False,
        name: str = "FusedEmaAdam",
        flat_state: bool = False,
    ):
        super().__init__(use_locking, name, flat_state)
        self._pending: dict[int, tf.Variable] = {}  # id -> variable whose s waits for iteration 0 (kept alive)
        self._lr = learning_rate
        self._attrs = {
            "beta1": beta1, "beta2": beta2, "eps": epsilon, "ema_decay": ema_decay, "weight_decay": weight_decay,
            "mode": mode, "bias_correction": bias_correction,
        }

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name)
            if initialized(v):
                self._get_or_make_slot(v, _current_value(v), "s", self._name)
            else:
                self._zeros_slot(v, "s", self._name)
                self._pending[id(v)] = v

    def _at_first_step(self) -> tf.Tensor:
        """Variables made inside the tf.function being traced have no value when their slots are made (TF
        initializes them after tracing): their s starts at zero and is copied from them at iteration 0 (the
        iteration count, or global_step when given), just before the update, as when they exist beforehand
        (tf_plugin/pending_average.py)."""
        return tf.equal(tf.cast(self._step_count, tf.int64), 0)

    def _inputs(self) -> dict:
        return {"step": tf.cast(self._step_count, tf.int64) + 1, "lr": tf.cast(self._lr, tf.float32), **self._attrs}

    def _apply_dense(self, grad, var):
        return raw_ops.ApplyFusedEmaAdam(
            var=var, m=self.get_slot(var, "m"), v=self.get_slot(var, "v"), s=self.get_slot(var, "s"), grad=grad,
            use_locking=self._use_locking, **self._inputs(),
        )

    def _flat_initial(self, name, variables):
        if name != "s":
            return None
        self._pending.update((id(v), v) for v in variables if not initialized(v))
        return tf.concat([tf.reshape(_current_value(v), [-1]) if id(v) not in self._pending else
                          tf.zeros([v.shape.num_elements()], v.dtype.base_dtype) for v in variables], 0)

    def _copy_pending_flat(self, s, dtype) -> list:
        layout, _, index, variables = self._flat_built[_graph_key()]
        places = [(layout.places[index[id(v)]], v) for v in variables]
        group = [(place.offset, place.size, v if id(v) in self._pending else None) for place, v in places
                 if place.dtype == dtype]
        if all(v is None for _, _, v in group):
            return []
        return when(self._at_first_step(), lambda: copy_into_flat(s, group))

    def _apply_flat(self, flat, variables, grads, state_offsets, dtype):
        with tf.control_dependencies(self._copy_pending_flat(flat[2], dtype)):
            return raw_ops.ResourceApplyMultiFusedEmaAdam(
                vars=variables, m=flat[0], v=flat[1], s=flat[2], grads=grads, use_locking=self._use_locking,
                state_offsets=state_offsets, **self._inputs())

    def _resource_apply_dense(self, grad, handle):
        s = self.get_slot(handle, "s")
        start = []
        if id(handle) in self._pending:
            start = when(self._at_first_step(), lambda: s.assign(tf.convert_to_tensor(handle)))
        with tf.control_dependencies(start):
            return raw_ops.ResourceApplyFusedEmaAdam(
                var=handle.handle, m=self.get_slot(handle, "m").handle, v=self.get_slot(handle, "v").handle,
                s=s.handle, grad=grad, use_locking=self._use_locking, **self._inputs(),
            )


def _current_value(var) -> tf.Tensor:
    """The EMA slot's starting value: the variable's current value when eager; in a graph (where slots are made
    before training) the variable's initial value, which its initializer and the slot's consume in one run."""
    if tf.executing_eagerly() or tf.compat.v1.executing_eagerly_outside_functions():
        with tf.init_scope():
            return tf.identity(var)
    return var.initial_value
