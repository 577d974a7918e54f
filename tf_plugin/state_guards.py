"""What the Keras optimizers check before they write: the variables at build (dtypes from op_spec, each once), each
apply_gradients call (each variable once, every gradient's shape, before any dtype group is written), variables
the optimizer does not own, and checkpoints or weights files of the other ``flat_state`` layout (refused before
anything of the optimizer is restored)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from op_spec import OpSignature
from tf_plugin import keras_checks
from tf_plugin.flat_state import FlatLayout

# The attributes holding the slots of each layout: they are the optimizer's children in a TF checkpoint.
FLAT_SLOTS_ATTR = "_flat"


class StateGuardsMixin:
    """For keras.optimizers.Optimizer subclasses with ``flat_state``, ``flat_slot_names``, ``op_signature`` (the
    op_spec signature whose dtypes the variables must have) and ``per_variable_slot_attrs`` (the attributes that hold
    the per-variable slots, e.g. ``("_momentums",)``)."""

    op_signature: OpSignature
    per_variable_slot_attrs: tuple[str, ...] = ()

    def _check_build(self, var_list: Sequence[Any]) -> None:
        """Before any variable is made: every variable once, each of a dtype the op supports."""
        name = type(self).__name__
        keras_checks.check_unique(name, var_list, self._var_key)
        keras_checks.check_dtypes(name, var_list, self.op_signature.dtypes, self.op_signature.resource_op)

    def apply(self, grads, trainable_variables=None):
        """Checks the call as a whole before anything is written: each variable once, every gradient's shape (a
        shape known only when the step runs is checked then, before any update and before iterations moves)."""
        name, grads = type(self).__name__, list(grads)
        if trainable_variables is not None:
            trainable_variables = list(trainable_variables)
            keras_checks.check_unique(name, trainable_variables, self._var_key)
        variables = trainable_variables if trainable_variables is not None else getattr(self, "_trainable_variables", [])
        checks = keras_checks.check_gradient_shapes(name, list(zip(grads, variables)))
        with tf.control_dependencies(checks):
            return super().apply(grads, trainable_variables)

    def _get_variable_index(self, variable) -> int:
        try:
            return super()._get_variable_index(variable)
        except KeyError:
            count = len(getattr(self, "_trainable_variables", []))
            raise keras_checks.not_owned_error(type(self).__name__, variable, count) from None

    # --- checkpoints and weights files of the other layout -------------------------------------------------------

    def _lookup_dependency(self, name, cached_dependencies=None):
        """TF's checkpoint restore asks for each saved child by name before it restores any value: a child that
        only the other layout has means the checkpoint was written with the other flat_state."""
        saved_flat = True if name == FLAT_SLOTS_ATTR else False if name in self.per_variable_slot_attrs else None
        if saved_flat is not None and saved_flat != self.flat_state:
            raise keras_checks.layout_mismatch_error(type(self).__name__, saved_flat, self.flat_state,
                                                     "The checkpoint")
        return super()._lookup_dependency(name, cached_dependencies)

    def load_own_variables(self, store):
        """Keras's loading of a .keras / .weights.h5 file: a file of the other layout is refused before any of the
        optimizer's variables is assigned; otherwise as Keras (which warns and skips when the optimizer is not
        built yet, as for its own optimizers)."""
        if self.built and store is not None:
            saved = [tuple(store[str(i)].shape) for i in range(len(store.keys()))]
            if saved != [tuple(v.shape) for v in self.variables] and saved == self._other_layout_shapes():
                raise keras_checks.layout_mismatch_error(type(self).__name__, not self.flat_state, self.flat_state,
                                                         "The weights file")
        return super().load_own_variables(store)

    def _other_layout_shapes(self) -> list[tuple[int, ...]]:
        """The shapes self.variables would have with the other flat_state (same variables, same base state)."""
        var_list = list(self._trainable_variables)
        layout = FlatLayout(var_list)
        names = self.flat_slot_names
        if self.flat_state:
            ours = len(names) * len(layout.groups)
            other = [tuple(int(d) for d in v.shape) for _ in names for v in var_list]
        else:
            ours = len(names) * len(var_list)
            other = [(layout.totals[dtype],) for dtype in layout.groups for _ in names]
        head = [tuple(v.shape) for v in self.variables[:len(self.variables) - ours]]
        return head + other
