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
