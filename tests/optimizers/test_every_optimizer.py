"""The standard test over every optimizer of the package (as TF Addons' standard_test): each one minimizes a real
Keras model, round-trips its config, and saves and reloads in a .keras file with its state (training then
continues identically). The TF1 optimizers minimize a tf.compat.v1 graph."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.models import classification_data, small_model
from tf_plugin.compat.v1 import FusedEmaAdamOptimizer, PowerSignOptimizer
from tf_plugin.optimizers import FusedEmaAdam, PowerSign
from tf_plugin.sign_decay import get_cosine_decay_fn

EVERY_KERAS_OPTIMIZER = {
    "powersign": lambda: PowerSign(learning_rate=0.01),
    "powersign-cosine": lambda: PowerSign(learning_rate=0.03, sign_decay="cosine", decay_steps=40),
    "powersign-restart-clipnorm": lambda: PowerSign(learning_rate=0.02, base=3.0, beta=0.7, sign_decay="restart",
                                                    decay_steps=9, clipnorm=1.0),
    "powersign-schedule": lambda: PowerSign(learning_rate=keras.optimizers.schedules.ExponentialDecay(0.05, 10, 0.9)),
    "fused_ema_adam": lambda: FusedEmaAdam(learning_rate=0.01, weight_decay=0.001, ema_decay=0.9),
    "fused_ema_adam-l2": lambda: FusedEmaAdam(learning_rate=0.01, weight_decay=0.001, mode="l2"),
    "fused_ema_adam-no-bias-correction": lambda: FusedEmaAdam(learning_rate=0.003, beta_1=0.8, beta_2=0.95,
                                                              epsilon=1e-6, ema_decay=0.99, weight_decay=0.05,
                                                              mode="l2", bias_correction=False),
}
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@pytest.mark.parametrize("name", list(EVERY_KERAS_OPTIMIZER))
def test_minimizes(name):
    x, y = classification_data()
    model = small_model()
    model.compile(optimizer=EVERY_KERAS_OPTIMIZER[name](), loss=LOSS)
    history = model.fit(x, y, batch_size=32, epochs=5, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.8 * losses[0], losses
    assert int(model.optimizer.iterations.numpy()) == 5 * 8


@pytest.mark.parametrize("name", list(EVERY_KERAS_OPTIMIZER))
def test_config_round_trip(name):
    opt = EVERY_KERAS_OPTIMIZER[name]()
    config = opt.get_config()
    again = type(opt).from_config(config)
    assert again.get_config() == config
    revived = keras.optimizers.deserialize(keras.optimizers.serialize(opt))
    assert type(revived) is type(opt) and revived.get_config() == config


@pytest.mark.parametrize("name", list(EVERY_KERAS_OPTIMIZER))
def test_save_and_reload_keras_model_with_optimizer_state(name, tmp_path):
    x, y = classification_data(2)
    model = small_model()
    model.compile(optimizer=EVERY_KERAS_OPTIMIZER[name](), loss=LOSS)
    model.fit(x, y, batch_size=64, epochs=1, verbose=0)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded.optimizer) is type(model.optimizer)
    assert loaded.optimizer.get_config() == model.optimizer.get_config()
    # iterations, lr (unless a schedule), then the slots (one flat variable per dtype and slot name)
    saved, restored = model.optimizer.variables, loaded.optimizer.variables
    assert len(saved) == len(restored) >= 2
    for a, b in zip(saved, restored):
        assert a.path.rsplit("_", 1)[-1] == b.path.rsplit("_", 1)[-1]  # same slot kind (m, v, s, ...)
        np.testing.assert_array_equal(b.numpy(), a.numpy(), err_msg=a.path)
    # Training continues identically from the reloaded state.
    model.fit(x, y, batch_size=64, epochs=1, verbose=0, shuffle=False)
    loaded.fit(x, y, batch_size=64, epochs=1, verbose=0, shuffle=False)
    for a, b in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


EVERY_TF1_OPTIMIZER = {
    "PowerSignOptimizer": lambda: PowerSignOptimizer(learning_rate=0.05),
    "PowerSignOptimizer-cosine": lambda: PowerSignOptimizer(learning_rate=0.03,
                                                            sign_decay_fn=get_cosine_decay_fn(40)),
    "FusedEmaAdamOptimizer": lambda: FusedEmaAdamOptimizer(learning_rate=0.01, weight_decay=0.001, ema_decay=0.9),
    "FusedEmaAdamOptimizer-l2": lambda: FusedEmaAdamOptimizer(learning_rate=0.01, weight_decay=0.001, mode=0),
    "PowerSignOptimizer-flat": lambda: PowerSignOptimizer(learning_rate=0.05, flat_state=True),
    "FusedEmaAdamOptimizer-flat": lambda: FusedEmaAdamOptimizer(learning_rate=0.01, weight_decay=0.001,
                                                                ema_decay=0.9, flat_state=True),
}


@pytest.mark.parametrize("use_resource", [False, True], ids=["ref", "resource"])
@pytest.mark.parametrize("name", list(EVERY_TF1_OPTIMIZER))
def test_tf1_minimizes(name, use_resource):
    if name.endswith("-flat") and not use_resource:
        pytest.skip("flat state needs resource variables (refused with a ValueError: test_optimizers_v1.py)")
    x, y = classification_data()
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        w1 = tf.compat.v1.get_variable("w1", initializer=np.random.default_rng(0).standard_normal((8, 16)).astype(
            np.float32) * 0.3, use_resource=use_resource)
        w2 = tf.compat.v1.get_variable("w2", initializer=np.zeros((16, 3), np.float32) + 0.01,
                                       use_resource=use_resource)
        logits = tf.nn.relu(tf.constant(x) @ w1) @ w2
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.constant(y), logits=logits))
        global_step = tf.compat.v1.train.get_or_create_global_step()
        train = EVERY_TF1_OPTIMIZER[name]().minimize(loss, global_step=global_step)
        sess.run(tf.compat.v1.global_variables_initializer())
        losses = [sess.run([train, loss])[1] for _ in range(40)]
        assert sess.run(global_step) == 40
    assert losses[-1] < 0.8 * losses[0], losses
