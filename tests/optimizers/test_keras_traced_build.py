"""Models without keras.Input: Keras creates the variables, and builds the optimizer, inside the first traced train
step. fit, train_on_batch and an Embedding model then train as with keras.Input, bit for bit (weights, slots and
EMA), for both layouts, with XLA too; and the TF1 optimizers on variables made inside their tf.function."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.models import optimizer_state, seeded_dense_model, seeded_embedding_model
from tf_plugin.compat.v1 import FusedEmaAdamOptimizer, PowerSignOptimizer
from tf_plugin.optimizers import FusedEmaAdam, PowerSign

MAKERS = {
    "fused_ema_adam": lambda flat: FusedEmaAdam(0.01, weight_decay=0.01, ema_decay=0.8, flat_state=flat),
    "fused_ema_adam-use_ema": lambda flat: FusedEmaAdam(0.01, ema_decay=0.8, use_ema=True, flat_state=flat),
    "powersign": lambda flat: PowerSign(0.01, sign_decay="cosine", decay_steps=10, flat_state=flat),
}


def _dense_data():
    rng = np.random.default_rng(4)
    return rng.standard_normal((48, 5)).astype(np.float32), rng.standard_normal((48, 3)).astype(np.float32)


def _embedding_data():
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, 20, (48, 6)).astype(np.int32)
    tokens[:, 0] = 0  # a repeated row: duplicate indices in every sparse gradient
    return tokens, rng.standard_normal((48, 3)).astype(np.float32)


def _trained(kind: str, name: str, flat: bool, with_input: bool, how: str, jit: bool = False) -> list[np.ndarray]:
    model = seeded_dense_model(with_input) if kind == "dense" else seeded_embedding_model(with_input)
    x, y = _dense_data() if kind == "dense" else _embedding_data()
    model.compile(optimizer=MAKERS[name](flat), loss="mse", jit_compile=jit)
    if how == "fit":
        model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False)
    else:
        for start in range(0, 48, 16):
            model.train_on_batch(x[start:start + 16], y[start:start + 16])
    assert int(model.optimizer.iterations.numpy()) == (6 if how == "fit" else 3)
    return [np.asarray(w) for w in model.get_weights()] + optimizer_state(model)


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "per_variable"])
@pytest.mark.parametrize("name", list(MAKERS))
@pytest.mark.parametrize("how", ["fit", "train_on_batch"])
@pytest.mark.parametrize("kind", ["dense", "embedding"])
def test_without_keras_input_trains_bitwise_as_with_it(kind, how, name, flat):
    want = _trained(kind, name, flat, True, how)
    got = _trained(kind, name, flat, False, how)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert all(np.isfinite(a).all() for a in got)


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "per_variable"])
def test_without_keras_input_under_xla(flat):
    want = _trained("dense", "fused_ema_adam", flat, True, "fit", jit=True)
    got = _trained("dense", "fused_ema_adam", flat, False, "fit", jit=True)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_the_average_starts_at_the_initial_weights():
    """After one step with ema_decay=0.5, s is the mean of the initial and the updated weights (exact in float32:
    both halves are exact and the sum rounds once)."""
    x, y = _dense_data()
    initial = [np.asarray(w) for w in seeded_dense_model(True).get_weights()]
    for flat in (True, False):
        model = seeded_dense_model(False)
        model.compile(optimizer=FusedEmaAdam(0.01, ema_decay=0.5, flat_state=flat), loss="mse")
        model.train_on_batch(x[:16], y[:16])
        for w, start in zip(model.trainable_variables, initial):
            assert not np.array_equal(np.asarray(w), start)
            want = np.float32(0.5) * start + np.float32(0.5) * np.asarray(w)
            np.testing.assert_array_equal(np.asarray(model.optimizer.ema_variable(w)), want)


def _v1_train(make, flat: bool, inside: bool) -> list[np.ndarray]:
    """Two steps of a TF1 optimizer in a tf.function; the variables are made in it (inside) or before it."""
    holder: list[tf.Variable] = []
    rng = np.random.default_rng(6)
    start = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    opt = make(flat)

    def variables():
        if not holder:
            holder.extend(tf.Variable(v) for v in start)
        return holder

    if not inside:
        variables()

    @tf.function
    def step(g0, g1):
        opt.apply_gradients([(g0, variables()[0]), (g1, variables()[1])])

    for k in range(2):
        step(tf.constant(rng.standard_normal((4, 3)).astype(np.float32)) * (k + 1),
             tf.constant(rng.standard_normal(3).astype(np.float32)))
    if flat:  # the flat slots and the iteration count, by their fixed names
        state = sorted(opt.variables(), key=lambda v: v.name)
        assert len(state) == 1 + len(opt.flat_slot_names)
    else:
        state = [opt.get_slot(v, name) for v in holder for name in opt.get_slot_names()]
        assert len(state) == 2 * len(opt.flat_slot_names)
    return [v.numpy() for v in holder] + [np.asarray(v) for v in state]


V1 = {
    "fused_ema_adam": lambda flat: FusedEmaAdamOptimizer(0.01, ema_decay=0.5, flat_state=flat),
    "powersign": lambda flat: PowerSignOptimizer(0.01, flat_state=flat),
}


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "per_variable"])
@pytest.mark.parametrize("name", list(V1))
def test_v1_optimizers_on_variables_made_inside_the_function(name, flat):
    want = _v1_train(V1[name], flat, inside=False)
    got = _v1_train(V1[name], flat, inside=True)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
