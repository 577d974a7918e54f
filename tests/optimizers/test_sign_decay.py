"""tf_plugin.sign_decay against tf.contrib's pure-Python references (sign_decay_test.py), at many steps."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from tf_plugin import sign_decay

STEPS = [0, 1, 2, 99, 100, 101, 250, 333, 499, 500, 501, 750, 900, 999, 1000, 1001, 5000]
DECAY_STEPS = 1000


def py_linear(step, decay_steps):
    step = min(step, decay_steps)
    return float(decay_steps - step) / decay_steps


def py_cosine(step, decay_steps, num_periods=0.5, zero_after=None):
    step = min(step, decay_steps)
    fraction = 2.0 * num_periods * step / float(decay_steps)
    if zero_after is not None and fraction >= 2 * zero_after:
        return 0.0
    return 0.5 * (1.0 + math.cos(math.pi * fraction))


def py_restart(step, decay_steps, num_periods=1, zero_after=None):
    step = min(step, decay_steps)
    num = (num_periods * step) % decay_steps
    if zero_after is not None and num_periods * step / float(decay_steps) >= zero_after:
        return 0.0
    return 0.5 * (1.0 + math.cos(math.pi * num / float(decay_steps)))


CASES = [
    ("linear", sign_decay.get_linear_decay_fn(DECAY_STEPS), lambda t: py_linear(t, DECAY_STEPS)),
    ("cosine", sign_decay.get_cosine_decay_fn(DECAY_STEPS), lambda t: py_cosine(t, DECAY_STEPS)),
    (
        "cosine-5-2",
        sign_decay.get_cosine_decay_fn(DECAY_STEPS, num_periods=5, zero_after=2),
        lambda t: py_cosine(t, DECAY_STEPS, 5, 2),
    ),
    ("restart", sign_decay.get_restart_decay_fn(DECAY_STEPS), lambda t: py_restart(t, DECAY_STEPS)),
    (
        "restart-5-2",
        sign_decay.get_restart_decay_fn(DECAY_STEPS, num_periods=5, zero_after=2),
        lambda t: py_restart(t, DECAY_STEPS, 5, 2),
    ),
]


@pytest.mark.parametrize("name,fn,reference", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("step_dtype", [tf.int32, tf.int64, tf.float32])
def test_decay_matches_contrib_reference(name, fn, reference, step_dtype):
    for step in STEPS:
        got = fn(tf.constant(step, step_dtype))
        assert got.dtype == tf.float32
        assert float(got) == pytest.approx(reference(step), abs=1e-5), (name, step)


def test_decay_of_a_variable_in_a_tf_function_follows_the_variable():
    step = tf.Variable(0, dtype=tf.int64)
    fn = tf.function(sign_decay.get_cosine_decay_fn(10))
    values = []
    for _ in range(12):
        values.append(float(fn(step)))
        step.assign_add(1)
    np.testing.assert_allclose(values, [py_cosine(t, 10) for t in range(12)], atol=1e-6)


def test_known_points():
    assert float(sign_decay.get_linear_decay_fn(10)(0)) == 1.0
    assert float(sign_decay.get_linear_decay_fn(10)(10)) == 0.0
    assert float(sign_decay.get_cosine_decay_fn(10)(10)) == pytest.approx(0.0, abs=1e-7)
    assert float(sign_decay.get_restart_decay_fn(10)(10)) == 1.0  # the clamp: step = decay_steps restarts


@pytest.mark.parametrize("make", [sign_decay.get_linear_decay_fn, sign_decay.get_cosine_decay_fn,
                                  sign_decay.get_restart_decay_fn])
def test_global_step_none_and_bad_decay_steps(make):
    with pytest.raises(ValueError, match="global_step is required"):
        make(10)(None)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="decay_steps"):
            make(bad)


def test_by_name():
    assert float(sign_decay.by_name("linear", 4)(1)) == 0.75
    with pytest.raises(ValueError, match="decay_steps"):
        sign_decay.by_name("cosine", None)
    with pytest.raises(ValueError, match="one of"):
        sign_decay.by_name("exponential", 10)
