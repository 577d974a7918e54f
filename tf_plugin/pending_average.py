"""FusedEmaAdam's EMA slot "s" starts as a copy of its variable. A model without ``keras.Input`` creates its
variables inside the first traced train step, and Keras builds the optimizer in that step too: outside the function
(where the slots are made) those variables have no value yet, as TensorFlow initializes them only after tracing.
Their part of s then starts at zero and the step copies the variable into it while the optimizer has made no update
yet (``iterations`` below the first update, as Keras's own ``use_ema`` average starts at its first step), just
before the fused op. The result is the same, bit for bit, as a build outside the step. Variables that have a value
at build are copied then, as before, and their steps carry no copy; nor does a step traced after the first update
(graph_ir's lowering traces such a step again, so that it lowers as the step of a model built beforehand). The TF1 optimizer (tf_plugin/compat/v1.py)
does the same at its iteration 0 with the helpers here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from tf_plugin.arg_checks import tf_variable


def initialized(variable: Any) -> bool:
    """Whether the variable has a value outside any function being traced (always, in a TF1 graph)."""
    if not tf.compat.v1.executing_eagerly_outside_functions():
        return True
    with tf.init_scope():
        try:
            return bool(tf_variable(variable).is_initialized())
        except (AttributeError, NotImplementedError, TypeError):
            return True


PENDING_SCOPE = "pending_ema_copy"  # the name scope of the first step's copy (graph_ir's lowering looks for it)


def when(condition: Any, action: Callable[[], Any]) -> list:
    """Runs `action` for its effect where `condition` holds; returns what the update must wait for (nothing
    eagerly, where it has run)."""

    def run():
        action()  # both branches return nothing

    with tf.name_scope(PENDING_SCOPE):
        done = tf.cond(condition, run, lambda: None)
    return [] if done is None else [done]


def copy_into_flat(s: Any, parts: Sequence[tuple[int, int, Any]]) -> None:
    """Rewrites the flat slot s from `parts` (offset, size, variable) in order: a variable's part becomes its value,
    a part without one (None) keeps what s holds there."""
    old = tf.convert_to_tensor(s)
    s.assign(tf.concat([old[offset:offset + size] if variable is None else
                        tf.reshape(tf.convert_to_tensor(variable), [-1]) for offset, size, variable in parts], 0))


class PendingAverageMixin:
    """For FusedEmaAdam: which variables' averages wait for the first step, and the step's copy."""

    _pending_averages: frozenset[int] = frozenset()

    def _find_pending_averages(self, var_list: Sequence[Any]) -> None:
        self._pending_averages = frozenset(i for i, v in enumerate(var_list) if not initialized(v))

    def _settle_pending_averages(self) -> None:
        """Forgets the pending copies once the first update is behind (iterations only grows): a step traced
        after it carries no copy, so it lowers to GE as a step of a model built beforehand does."""
        if not self._pending_averages or not tf.compat.v1.executing_eagerly_outside_functions():
            return
        with tf.init_scope():
            done = int(tf.convert_to_tensor(self.iterations)) >= (self.gradient_accumulation_steps or 1)
        if done:
            self._pending_averages = frozenset()

    def _before_first_update(self) -> tf.Tensor:
        # Keras runs the update step only every gradient_accumulation_steps iterations.
        first = self.gradient_accumulation_steps or 1
        return tf.less(tf.convert_to_tensor(self.iterations), tf.constant(first, tf.int64))

    def _start_pending_flat(self, s: Any, dtype: str) -> list:
        """The ops that copy the group's pending variables into the flat s (none when there are none)."""
        group = self._layout.groups[dtype]
        self._settle_pending_averages()
        if not any(i in self._pending_averages for i in group):
            return []
        parts = [(self._layout.places[i].offset, self._layout.places[i].size,
                  tf_variable(self._trainable_variables[i]) if i in self._pending_averages else None) for i in group]
        return when(self._before_first_update(), lambda: copy_into_flat(s, parts))

    def _start_pending_variable(self, average: Any, variable: Any, index: int) -> list:
        """The op that copies a pending variable into its own slot s (per-variable state)."""
        self._settle_pending_averages()
        if index not in self._pending_averages:
            return []
        return when(self._before_first_update(), lambda: average.assign(tf.convert_to_tensor(variable)))
