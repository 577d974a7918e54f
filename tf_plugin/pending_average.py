"""FusedEmaAdam's EMA slot "s" starts as a copy of its variable. A model without ``keras.Input`` creates its
variables inside the first traced train step, and Keras builds the optimizer in that step too: outside the function
(where the slots are made) those variables have no value yet, as TensorFlow initializes them only after tracing.
Their part of s then starts at zero and the step copies the variable into it while the optimizer has made no update
yet (``iterations`` below the first update, as Keras's own ``use_ema`` average starts at its first step), just
before the fused op. The result is the same, bit for bit, as a build outside the step. Variables that have a value
at build are copied then, as before, and their steps carry no copy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf


def initialized(variable: Any) -> bool:
    """Whether the variable has a value outside any function being traced."""
    value = variable.value if isinstance(variable, keras.Variable) else variable
    with tf.init_scope():
        try:
            return bool(value.is_initialized())
        except (AttributeError, NotImplementedError, TypeError):
            return True


class PendingAverageMixin:
    """For FusedEmaAdam: which variables' averages wait for the first step, and the step's copy."""

    _pending_averages: frozenset[int] = frozenset()

    def _find_pending_averages(self, var_list: Sequence[Any]) -> None:
        self._pending_averages = frozenset(i for i, v in enumerate(var_list) if not initialized(v))

    def _before_first_update(self) -> tf.Tensor:
        # Keras runs the update step only every gradient_accumulation_steps iterations.
        first = self.gradient_accumulation_steps or 1
        return tf.less(tf.convert_to_tensor(self.iterations), tf.constant(first, tf.int64))

    def _start_pending_flat(self, s: Any, dtype: str) -> list:
        """The ops that copy the group's pending variables into the flat s (none when there are none)."""
        pending = [i for i in self._layout.groups[dtype] if i in self._pending_averages]
        if not pending:
            return []
        variables = self._trainable_variables

        def copy():
            old = tf.convert_to_tensor(s)
            parts = []
            for i in self._layout.groups[dtype]:
                place = self._layout.places[i]
                if i in self._pending_averages:
                    parts.append(tf.reshape(tf.convert_to_tensor(_tf_value(variables[i])), [-1]))
                else:
                    parts.append(old[place.offset:place.offset + place.size])
            s.assign(tf.concat(parts, 0))

        return _ops(tf.cond(self._before_first_update(), copy, lambda: None))

    def _start_pending_variable(self, average: Any, variable: Any, index: int) -> list:
        """The op that copies a pending variable into its own slot s (per-variable state)."""
        if index not in self._pending_averages:
            return []

        def copy():
            average.assign(tf.convert_to_tensor(variable))

        return _ops(tf.cond(self._before_first_update(), copy, lambda: None))


def _ops(cond: Any) -> list:
    """The cond as a control dependency (eagerly it has run and there is nothing to wait for)."""
    return [] if cond is None else [cond]


def _tf_value(variable: Any) -> Any:
    return variable.value if isinstance(variable, keras.Variable) else variable
