"""Checkpoints and .keras weights of one flat_state layout loaded into the other: refused with a message naming
flat_state before anything is restored (model weights, iterations and slots unchanged), whether the optimizer is
built at restore time or not; the same layout still restores; an unbuilt optimizer in model.load_weights is skipped
with Keras's warning, as Keras does for its own optimizers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.models import seeded_dense_model
from tf_plugin.optimizers import FusedEmaAdam, PowerSign

MAKERS = {
    "fused_ema_adam": lambda flat: FusedEmaAdam(0.01, ema_decay=0.8, flat_state=flat),
    "powersign": lambda flat: PowerSign(0.01, flat_state=flat),
}


def _trained(name: str, flat: bool):
    rng = np.random.default_rng(7)
    model = seeded_dense_model(True)
    model.compile(optimizer=MAKERS[name](flat), loss="mse")
    model.fit(rng.standard_normal((32, 5)).astype(np.float32), rng.standard_normal((32, 3)).astype(np.float32),
              batch_size=8, verbose=0)
    return model


def _fresh(name: str, flat: bool, built: bool):
    model = seeded_dense_model(True)
    model.compile(optimizer=MAKERS[name](flat), loss="mse")
    if built:
        model.optimizer.build(model.trainable_variables)
    return model


def _everything(model) -> list[np.ndarray]:
    return [np.asarray(w) for w in model.get_weights()] + [np.asarray(v) for v in model.optimizer.variables]


@pytest.mark.parametrize("built", [True, False], ids=["built", "unbuilt"])
@pytest.mark.parametrize("saved_flat", [True, False], ids=["flat_into_per_variable", "per_variable_into_flat"])
@pytest.mark.parametrize("name", list(MAKERS))
def test_checkpoint_of_the_other_layout_is_refused_before_anything_is_restored(name, saved_flat, built, tmp_path):
    source = _trained(name, saved_flat)
    path = tf.train.Checkpoint(model=source, optimizer=source.optimizer).save(str(tmp_path / "ckpt"))
    target = _fresh(name, not saved_flat, built)
    before = _everything(target)
    with pytest.raises(ValueError, match=rf"saved with flat_state={saved_flat}.*has flat_state={not saved_flat}.*"
                                         rf"Create the optimizer with flat_state={saved_flat}"):
        tf.train.Checkpoint(model=target, optimizer=target.optimizer).restore(path).expect_partial()
    after = _everything(target)
    assert len(after) == len(before)
    for a, b in zip(after, before):
        np.testing.assert_array_equal(a, b)
    assert int(target.optimizer.iterations.numpy()) == 0


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "per_variable"])
@pytest.mark.parametrize("name", list(MAKERS))
def test_checkpoint_of_the_same_layout_restores(name, flat, tmp_path):
    source = _trained(name, flat)
    path = tf.train.Checkpoint(model=source, optimizer=source.optimizer).save(str(tmp_path / "ckpt"))
    target = _fresh(name, flat, built=False)
    tf.train.Checkpoint(model=target, optimizer=target.optimizer).restore(path)
    target.optimizer.build(target.trainable_variables)  # the slots are restored as they are made
    for a, b in zip(_everything(target), _everything(source)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("saved_flat", [True, False], ids=["flat_into_per_variable", "per_variable_into_flat"])
@pytest.mark.parametrize("name", list(MAKERS))
def test_keras_weights_of_the_other_layout_are_refused(name, saved_flat, tmp_path):
    source = _trained(name, saved_flat)
    source.save(str(tmp_path / "model.keras"))
    target = _fresh(name, not saved_flat, built=True)
    before = [np.asarray(v) for v in target.optimizer.variables]
    with pytest.raises(ValueError, match=rf"weights file holds .* flat_state={saved_flat}"):
        target.load_weights(str(tmp_path / "model.keras"))
    for a, b in zip(target.optimizer.variables, before):
        np.testing.assert_array_equal(np.asarray(a), b)


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "per_variable"])
def test_keras_weights_of_the_same_layout_load_and_an_unbuilt_optimizer_warns_as_keras(flat, tmp_path):
    source = _trained("fused_ema_adam", flat)
    source.save(str(tmp_path / "model.keras"))
    target = _fresh("fused_ema_adam", flat, built=True)
    target.load_weights(str(tmp_path / "model.keras"))
    for a, b in zip(_everything(target), _everything(source)):
        np.testing.assert_array_equal(a, b)
    unbuilt = _fresh("fused_ema_adam", flat, built=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        unbuilt.load_weights(str(tmp_path / "model.keras"))
    assert any("Skipping variable loading for optimizer" in str(w.message) for w in caught)
