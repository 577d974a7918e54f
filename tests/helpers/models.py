"""A small real classification problem and Keras model for the optimizer tests."""

from __future__ import annotations

import keras
import numpy as np


def classification_data(seed=0, n=256):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 8)).astype(np.float32)
    w = rng.standard_normal((8, 3)).astype(np.float32)
    y = np.argmax(x @ w + 0.1 * rng.standard_normal((n, 3)), axis=1)
    return x, y


def small_model():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)])


def seeded_dense_model(with_input: bool) -> keras.Model:
    """Two Dense layers with seeded initializers: the same weights whether they are made eagerly (keras.Input) or
    inside the first traced train step (no keras.Input)."""
    layers = [keras.layers.Dense(7, activation="tanh", kernel_initializer=keras.initializers.GlorotUniform(seed=1),
                                 bias_initializer=keras.initializers.RandomNormal(seed=2)),
              keras.layers.Dense(3, kernel_initializer=keras.initializers.GlorotUniform(seed=3))]
    return keras.Sequential(([keras.Input((5,))] if with_input else []) + layers)


def seeded_embedding_model(with_input: bool) -> keras.Model:
    """An Embedding (sparse gradients) and a Dense layer, seeded as seeded_dense_model."""
    layers = [keras.layers.Embedding(20, 4, embeddings_initializer=keras.initializers.RandomUniform(seed=4)),
              keras.layers.GlobalAveragePooling1D(),
              keras.layers.Dense(3, kernel_initializer=keras.initializers.GlorotUniform(seed=5))]
    return keras.Sequential(([keras.Input((6,), dtype="int32")] if with_input else []) + layers)


def optimizer_state(model: keras.Model) -> list[np.ndarray]:
    """The optimizer's variables (iterations, slots) and, for FusedEmaAdam, each weight's EMA."""
    opt = model.optimizer
    state = [np.asarray(v) for v in opt.variables]
    if hasattr(opt, "ema_variable"):
        state += [np.asarray(opt.ema_variable(w)) for w in model.trainable_variables]
    return state
