"""Sign-decay schedules for PowerSign, with tf.contrib.opt's formulas (``sign_decay.py``).

Each ``get_*_decay_fn`` returns a schedule ``fn(global_step) -> float32 scalar tensor``: an instance of
``LinearSignDecay``, ``CosineSignDecay`` or ``RestartSignDecay``, which are serializable Keras objects (like
``keras.optimizers.schedules.LearningRateSchedule``), so a PowerSign that uses one saves and loads in a ``.keras``
file. The step is clamped to ``decay_steps`` first, as in tf.contrib. PowerSign evaluates the schedule at the
iteration count *before* the update (0 at the first update), so the decay used by update t (1-based) is
``fn(t - 1)``.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf


def _check_decay_steps(decay_steps) -> int:
    if isinstance(decay_steps, bool) or not isinstance(decay_steps, int) or decay_steps <= 0:
        raise ValueError(f"decay_steps must be a positive int, got {decay_steps!r}")
    return decay_steps


def _half_cosine(fraction: tf.Tensor) -> tf.Tensor:
    return 0.5 * (1.0 + tf.cos(math.pi * fraction))


class SignDecay:
    """A sign-decay schedule: ``schedule(global_step)`` is the decay at that step (a float32 scalar tensor)."""

    name = "sign_decay"

    def __init__(self, decay_steps: int):
        self.decay_steps = _check_decay_steps(decay_steps)

    def _clamped_step(self, global_step) -> tf.Tensor:
        if global_step is None:
            raise ValueError(f"global_step is required for {self.name}")
        return tf.minimum(tf.cast(global_step, tf.float32), float(self.decay_steps))

    def __call__(self, global_step) -> tf.Tensor:
        raise NotImplementedError

    def get_config(self) -> dict:
        return {"decay_steps": self.decay_steps}

    @classmethod
    def from_config(cls, config: dict) -> SignDecay:
        return cls(**config)

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.get_config() == other.get_config()

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(self.get_config().items()))))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


@keras.saving.register_keras_serializable(package="tf_plugin")
class LinearSignDecay(SignDecay):
    """Linear decay: ``max(0, (decay_steps - min(step, decay_steps)) / decay_steps)``, 1 at step 0, 0 at the end."""

    name = "linear_decay"

    def __call__(self, global_step) -> tf.Tensor:
        step = self._clamped_step(global_step)
        return tf.maximum(0.0, (float(self.decay_steps) - step) / float(self.decay_steps))


class _PeriodicSignDecay(SignDecay):
    """A cosine schedule with a number of periods and an optional cut to zero."""

    default_periods: float = 1

    def __init__(self, decay_steps: int, num_periods: float | None = None, zero_after: float | None = None):
        super().__init__(decay_steps)
        self.num_periods = self.default_periods if num_periods is None else num_periods
        self.zero_after = zero_after

    def get_config(self) -> dict:
        return {**super().get_config(), "num_periods": self.num_periods, "zero_after": self.zero_after}


@keras.saving.register_keras_serializable(package="tf_plugin")
class CosineSignDecay(_PeriodicSignDecay):
    """Cosine decay: ``fraction = 2 * num_periods * min(step, decay_steps) / decay_steps``,
    ``0.5 * (1 + cos(pi * fraction))``; 0 where ``fraction >= 2 * zero_after`` when zero_after is given.

    With the default half period, the decay goes from 1 at step 0 to 0 at ``decay_steps``.
    """

    name = "cosine_decay"
    default_periods = 0.5

    def __call__(self, global_step) -> tf.Tensor:
        step = self._clamped_step(global_step)
        fraction = 2.0 * self.num_periods * (step / float(self.decay_steps))
        decayed = _half_cosine(fraction)
        if self.zero_after is not None:
            decayed = tf.where(fraction >= 2.0 * self.zero_after, 0.0, decayed)
        return decayed


@keras.saving.register_keras_serializable(package="tf_plugin")
class RestartSignDecay(_PeriodicSignDecay):
    """Cosine decay with restarts: ``num = mod(num_periods * min(step, decay_steps), decay_steps)``,
    ``0.5 * (1 + cos(pi * num / decay_steps))``; 0 where ``num_periods * step / decay_steps >= zero_after`` when
    zero_after is given. Because of the clamp (as in tf.contrib), the decay is 1 again at ``decay_steps``.
    """

    name = "restart_decay"

    def __call__(self, global_step) -> tf.Tensor:
        step = self._clamped_step(global_step)
        num = tf.math.floormod(self.num_periods * step, float(self.decay_steps))
        decayed = _half_cosine(num / float(self.decay_steps))
        if self.zero_after is not None:
            decayed = tf.where(self.num_periods * step / float(self.decay_steps) >= self.zero_after, 0.0, decayed)
        return decayed


def get_linear_decay_fn(decay_steps: int) -> LinearSignDecay:
    """tf.contrib's linear sign decay over ``decay_steps`` steps (see LinearSignDecay)."""
    return LinearSignDecay(decay_steps)


def get_cosine_decay_fn(decay_steps: int, num_periods: float = 0.5, zero_after: float | None = None) -> CosineSignDecay:
    """tf.contrib's cosine sign decay (see CosineSignDecay)."""
    return CosineSignDecay(decay_steps, num_periods, zero_after)


def get_restart_decay_fn(decay_steps: int, num_periods: float = 1, zero_after: float | None = None) -> RestartSignDecay:
    """tf.contrib's cosine sign decay with restarts (see RestartSignDecay)."""
    return RestartSignDecay(decay_steps, num_periods, zero_after)


_BY_NAME = {"linear": LinearSignDecay, "cosine": CosineSignDecay, "restart": RestartSignDecay}


def by_name(name: str, decay_steps: int | None) -> SignDecay:
    """The schedule called ``name`` ("linear", "cosine" or "restart") over ``decay_steps`` steps."""
    if name not in _BY_NAME:
        raise ValueError(f"sign_decay must be None, a callable or one of {sorted(_BY_NAME)}, got {name!r}")
    if decay_steps is None:
        raise ValueError(f"sign_decay={name!r} needs decay_steps (a positive int)")
    return _BY_NAME[name](decay_steps)
