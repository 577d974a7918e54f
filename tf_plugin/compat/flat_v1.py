"""Flat optimizer state for the TF1 optimizers (``flat_state=True``, resource variables): the slots of all variables
of one dtype are one non-slot variable per slot name ("m_float32", ...), concatenated in the order of the first
``apply_gradients`` call, and a step is one multi-tensor op call per dtype (see tf_plugin/flat_state.py for why).

``get_slot(var, name)`` then returns the variable's part of the flat slot as a tensor (read when it runs), not a
Variable; that is why flat state is an option here and not the default: TF1 code loads and saves slots by variable.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tf_plugin.flat_state import FlatLayout


def _graph_key() -> Any:
    return None if tf.executing_eagerly() else tf.compat.v1.get_default_graph()


class FlatV1Mixin:
    """For the TF1 optimizers. The subclass sets ``flat_slot_names``, ``_flat_initial(name, variables)`` (None:
    zeros) and ``_apply_flat(flat, variables, grads, state_offsets, dtype)``."""

    flat_slot_names: tuple[str, ...] = ()

    def _flat_state_for(self, variables: list) -> tuple[FlatLayout, dict, dict]:
        """The layout, flat variables and id(variable) -> index of this graph (made on the first call)."""
        key = _graph_key()
        built = self._flat_built.get(key)
        if built is None:
            layout = FlatLayout(variables)
            flat: dict[str, dict[str, Any]] = {name: {} for name in self.flat_slot_names}
            with tf.init_scope():
                for dtype, indices in layout.groups.items():
                    members = [variables[i] for i in indices]
                    for name in self.flat_slot_names:
                        initial = self._flat_initial(name, members)
                        if initial is None:
                            initial = tf.zeros([layout.totals[dtype]], dtype)
                        flat[name][dtype] = self._create_non_slot_variable(
                            initial_value=initial, name=f"{name}_{dtype}", colocate_with=members[0])
            # Indexed by id(); the list keeps the variables alive so that no id is reused while it is in use.
            built = (layout, flat, {id(v): i for i, v in enumerate(variables)}, list(variables))
            self._flat_built[key] = built
        return built[:3]

    def _apply_flat_gradients(self, pairs: list) -> list:
        """One multi-tensor op per dtype over (grad, var) pairs; returns the update ops."""
        for _, var in pairs:
            if not resource_variable(var):
                raise ValueError(f"flat_state=True needs resource variables; {var.name} is a ref variable (use "
                                 "tf.compat.v1.get_variable(..., use_resource=True) or flat_state=False)")
        layout, flat, index = self._flat_state_for([v for _, v in pairs])
        by_dtype: dict[str, list] = {}
        for grad, var in pairs:
            if id(var) not in index:
                raise ValueError(f"{var.name} is not among the variables this optimizer's flat state was built for "
                                 "(its first apply_gradients call); use one optimizer per variable set")
            by_dtype.setdefault(layout.places[index[id(var)]].dtype, []).append((index[id(var)], grad, var))
        ops = []
        for dtype, entries in by_dtype.items():
            indices = [i for i, _, _ in entries]
            offsets = [] if indices == layout.groups[dtype] else [layout.places[i].offset for i in indices]
            grads = [_dense(g, v) for _, g, v in entries]
            ops.append(self._apply_flat([flat[n][dtype] for n in self.flat_slot_names], [v for _, _, v in entries],
                                        grads, offsets, dtype))
        return ops

    def flat_slot(self, var, name: str) -> tf.Tensor | None:
        """var's part of the flat slot `name`, in var's shape; None when var has no flat state."""
        built = self._flat_built.get(_graph_key())
        if built is None or name not in self.flat_slot_names:
            return None
        layout, flat, index = built[:3]
        if id(var) not in index:
            return None
        place = layout.places[index[id(var)]]
        value = tf.convert_to_tensor(flat[name][place.dtype])
        return tf.reshape(value[place.offset:place.offset + place.size], place.shape)


def resource_variable(var) -> bool:
    return getattr(var, "handle", None) is not None and var.handle.dtype == tf.resource


def densify(values: tf.Tensor, indices: tf.Tensor, var) -> tf.Tensor:
    """A sparse gradient as the dense one of var's shape, duplicate indices summed."""
    rows = tf.shape(var, out_type=indices.dtype)[0]
    return tf.math.unsorted_segment_sum(values, indices, rows)


def _dense(grad, var) -> tf.Tensor:
    if isinstance(grad, tf.IndexedSlices):
        return densify(grad.values, grad.indices, var)
    return tf.convert_to_tensor(grad)
