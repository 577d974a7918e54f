"""Flat optimizer state for the Keras optimizers: one flat variable per dtype and slot ("m_float32", ...), holding
every variable's slot concatenated in build order, and one multi-tensor op call per dtype and step.

Per-variable costs dominate whole-model steps: TF moves every captured handle and tensor into the step function
(a few microseconds each) and every op call costs about 10 microseconds. With flat state the step passes two per
variable (the variable and its gradient) instead of five, and runs one op per dtype, sharded over all its elements.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import keras
import tensorflow as tf


@dataclass(frozen=True)
class Place:
    """Where a variable's state lives: its dtype's flat buffers, from `offset`, `size` elements, of `shape`."""

    dtype: str
    offset: int
    size: int
    shape: tuple[int, ...]


class FlatLayout:
    """The layout of the flat buffers for the variables an optimizer was built with."""

    def __init__(self, variables: Sequence[Any]):
        self.places: list[Place] = []
        self.groups: dict[str, list[int]] = {}  # dtype -> indices of its variables, in build order
        self.totals: dict[str, int] = {}
        for index, variable in enumerate(variables):
            dtype = tf.as_dtype(variable.dtype).name
            shape = tuple(int(d) for d in variable.shape)
            size = math.prod(shape)
            self.places.append(Place(dtype, self.totals.get(dtype, 0), size, shape))
            self.totals[dtype] = self.totals.get(dtype, 0) + size
            self.groups.setdefault(dtype, []).append(index)


def require_tensorflow_backend(name: str) -> None:
    if keras.backend.backend() != "tensorflow":
        raise ValueError(
            f"tf_plugin's {name} runs TensorFlow ops, but Keras uses the {keras.backend.backend()!r} backend; set "
            "KERAS_BACKEND=tensorflow before importing Keras."
        )


def _value(variable: Any) -> Any:
    """The tf.Variable behind a Keras Variable (distributed values stay as they are)."""
    return variable.value if isinstance(variable, keras.Variable) else variable


def _distributed(optimizer: Any) -> bool:
    """Whether the update must go through a tf.distribute strategy: one is entered now, or the optimizer was made
    under one (its variables are mirrored even when apply_gradients runs outside strategy.scope(), as in
    tf.function(lambda x, y: model.train_step((x, y))): Keras's own update then uses the optimizer's strategy)."""
    made_under = getattr(optimizer, "_distribution_strategy", None)
    return tf.distribute.has_strategy() or (made_under is not None and made_under is not tf.distribute.get_strategy())


def dense_gradient(gradient: Any) -> tf.Tensor:
    return tf.convert_to_tensor(gradient) if isinstance(gradient, tf.IndexedSlices) else gradient


class FlatStateMixin:
    """For keras.optimizers.Optimizer subclasses. The subclass sets ``flat_slot_names`` and implements
    ``_flat_step_scalars(learning_rate)`` (the step's scalars, computed once per step) and
    ``_apply_flat(flat, variables, grads, indices, state_offsets, scalars)`` (one multi-tensor op call)."""

    flat_slot_names: tuple[str, ...] = ()

    def _build_flat_state(self, var_list: Sequence[Any], initializers: dict[str, Callable]) -> None:
        """Creates the flat slots; initializers[name](variables) gives a Keras initializer (zeros otherwise)."""
        self._layout = FlatLayout(var_list)
        self._flat: dict[str, dict[str, keras.Variable]] = {name: {} for name in self.flat_slot_names}
        with tf.init_scope():  # created eagerly even when Keras builds the optimizer in the (XLA) step
            self._create_flat(var_list, initializers)

    def _create_flat(self, var_list: Sequence[Any], initializers: dict[str, Callable]) -> None:
        for dtype, indices in self._layout.groups.items():
            members = [var_list[i] for i in indices]
            for name in self.flat_slot_names:
                make = initializers.get(name)
                self._flat[name][dtype] = self.add_variable(
                    shape=(self._layout.totals[dtype],), dtype=dtype, name=f"{name}_{dtype}",
                    initializer=make(members) if make else "zeros")

    def flat_slot(self, name: str, variable: Any) -> tf.Tensor:
        """Variable's slot `name` (a value in the variable's shape), read from the flat buffers."""
        place = self._layout.places[self._get_variable_index(variable)]
        flat = tf.convert_to_tensor(_value(self._flat[name][place.dtype]))
        return tf.reshape(flat[place.offset:place.offset + place.size], place.shape)

    def _swap_flat_slot(self, name: str, variables: Sequence[Any]) -> None:
        """Exchanges each variable's value with its slot `name`: one read and one write of each flat buffer."""
        chosen = {self._get_variable_index(v): v for v in variables}
        for dtype, indices in self._layout.groups.items():
            if not any(i in chosen for i in indices):
                continue
            flat = self._flat[name][dtype]
            old = tf.convert_to_tensor(_value(flat))
            parts = []
            for i in indices:
                place = self._layout.places[i]
                piece = old[place.offset:place.offset + place.size]
                if i in chosen:
                    weights = tf.reshape(tf.convert_to_tensor(chosen[i]), [-1])
                    chosen[i].assign(tf.reshape(piece, place.shape))
                    piece = weights
                parts.append(piece)
            flat.assign(tf.concat(parts, 0))

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if not self.flat_state or _distributed(self):
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        # No strategy: the base class's all-reduce would add an Identity per gradient and change nothing.
        variables = [_value(v) for v in trainable_variables]
        self._distributed_tf_update_step(tf.distribute.get_strategy(), list(zip(grads, variables)), learning_rate)

    def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate):
        """One multi-tensor op call per dtype (per replica under a tf.distribute strategy)."""
        if not self.flat_state:
            return super()._distributed_tf_update_step(distribution, grads_and_vars, learning_rate)
        by_dtype: dict[str, list[tuple[int, Any, Any]]] = {}
        for grad, var in grads_and_vars:
            index = self._get_variable_index(var)
            by_dtype.setdefault(self._layout.places[index].dtype, []).append((index, grad, var))
        scalars = self._flat_step_scalars(learning_rate)
        for dtype, entries in by_dtype.items():
            indices = [i for i, _, _ in entries]
            # All the dtype's variables: the layout is implied. A subset (some gradients are None): say where.
            offsets = [] if indices == self._layout.groups[dtype] else [self._layout.places[i].offset for i in indices]
            flat = [_value(self._flat[name][dtype]) for name in self.flat_slot_names]

            def apply(first, others, variables, grads, dtype=dtype, indices=indices, offsets=offsets):
                grads = [tf.cast(dense_gradient(g), dtype) for g in grads]
                return self._apply_flat([first, *others], variables, grads, indices, offsets, scalars)

            distribution.extended.update(flat[0], apply, args=(flat[1:], [v for _, _, v in entries],
                                                                [g for _, g, _ in entries]), group=False)
