"""Sign-decay schedules for PowerSign, with tf.contrib.opt's formulas (``sign_decay.py``).

Each ``get_*_decay_fn`` returns ``fn(global_step) -> float32 scalar tensor``. The step is clamped to
``decay_steps`` first, as in tf.contrib. PowerSign evaluates the function at the iteration count *before* the
update (0 at the first update), so the decay used by update t (1-based) is ``fn(t - 1)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import tensorflow as tf

SignDecayFn = Callable[[object], tf.Tensor]


def _clamped_step(global_step, decay_steps: int, fn_name: str) -> tf.Tensor:
    if global_step is None:
        raise ValueError(f"global_step is required for {fn_name}")
    step = tf.cast(global_step, tf.float32)
    return tf.minimum(step, float(decay_steps))


def _check_decay_steps(decay_steps) -> int:
    if isinstance(decay_steps, bool) or not isinstance(decay_steps, int) or decay_steps <= 0:
        raise ValueError(f"decay_steps must be a positive int, got {decay_steps!r}")
    return decay_steps


def _half_cosine(fraction: tf.Tensor) -> tf.Tensor:
    return 0.5 * (1.0 + tf.cos(math.pi * fraction))


def get_linear_decay_fn(decay_steps: int) -> SignDecayFn:
    """Linear decay: ``max(0, (decay_steps - min(step, decay_steps)) / decay_steps)``, 1 at step 0, 0 at the end."""
    decay_steps = _check_decay_steps(decay_steps)

    def linear_decay_fn(global_step) -> tf.Tensor:
        step = _clamped_step(global_step, decay_steps, "linear_decay")
        return tf.maximum(0.0, (float(decay_steps) - step) / float(decay_steps))

    return linear_decay_fn


def get_cosine_decay_fn(decay_steps: int, num_periods: float = 0.5, zero_after: float | None = None) -> SignDecayFn:
    """Cosine decay: ``fraction = 2 * num_periods * min(step, decay_steps) / decay_steps``,
    ``0.5 * (1 + cos(pi * fraction))``; 0 where ``fraction >= 2 * zero_after`` when zero_after is given.

    With the default half period, the decay goes from 1 at step 0 to 0 at ``decay_steps``.
    """
    decay_steps = _check_decay_steps(decay_steps)

    def cosine_decay_fn(global_step) -> tf.Tensor:
        step = _clamped_step(global_step, decay_steps, "cosine_decay")
        fraction = 2.0 * num_periods * (step / float(decay_steps))
        decayed = _half_cosine(fraction)
        if zero_after is not None:
            decayed = tf.where(fraction >= 2.0 * zero_after, 0.0, decayed)
        return decayed

    return cosine_decay_fn


def get_restart_decay_fn(decay_steps: int, num_periods: float = 1, zero_after: float | None = None) -> SignDecayFn:
    """Cosine decay with restarts: ``num = mod(num_periods * min(step, decay_steps), decay_steps)``,
    ``0.5 * (1 + cos(pi * num / decay_steps))``; 0 where ``num_periods * step / decay_steps >= zero_after`` when
    zero_after is given. Because of the clamp (as in tf.contrib), the decay is 1 again at ``decay_steps``.
    """
    decay_steps = _check_decay_steps(decay_steps)

    def restart_decay_fn(global_step) -> tf.Tensor:
        step = _clamped_step(global_step, decay_steps, "restart_decay")
        num = tf.math.floormod(num_periods * step, float(decay_steps))
        decayed = _half_cosine(num / float(decay_steps))
        if zero_after is not None:
            decayed = tf.where(num_periods * step / float(decay_steps) >= zero_after, 0.0, decayed)
        return decayed

    return restart_decay_fn


_BY_NAME = {"linear": get_linear_decay_fn, "cosine": get_cosine_decay_fn, "restart": get_restart_decay_fn}


def by_name(name: str, decay_steps: int | None) -> SignDecayFn:
    """The schedule called ``name`` ("linear", "cosine" or "restart") over ``decay_steps`` steps."""
    if name not in _BY_NAME:
        raise ValueError(f"sign_decay must be None, a callable or one of {sorted(_BY_NAME)}, got {name!r}")
    if decay_steps is None:
        raise ValueError(f"sign_decay={name!r} needs decay_steps (a positive int)")
    return _BY_NAME[name](decay_steps)
