"""Whole training steps for the lowering tests: small Keras models of the three families (MLP classifier, CNN,
attention block), the ordinary tf.function training step, random batches, and K steps in graph_ir.Session beside K
steps in TensorFlow."""

from __future__ import annotations

import os
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf
from keras import layers

import graph_ir
from tests.helpers.lowering import captured, session_values, state_name

K = 3


def mlp(activation: str = "relu") -> keras.Model:
    return keras.Sequential([keras.Input((12,)), layers.Dense(16, activation=activation),
                             layers.Dense(8, activation="tanh"), layers.Dense(8, activation="sigmoid"),
                             layers.Dense(5)])


def cnn() -> keras.Model:
    """Conv2D (no bias before BatchNormalization: that bias's gradient is zero in exact arithmetic, so it holds
    rounding noise that Adam would blow up to a step of lr), BatchNormalization, relu, MaxPooling2D, Conv2D,
    AveragePooling2D, Flatten, Dense."""
    return keras.Sequential([keras.Input((8, 8, 3)), layers.Conv2D(4, 3, padding="same", use_bias=False),
                             layers.BatchNormalization(), layers.Activation("relu"), layers.MaxPooling2D(),
                             layers.Conv2D(6, 3), layers.AveragePooling2D(2), layers.Flatten(), layers.Dense(5)])


def attention() -> keras.Model:
    """Embedding, MultiHeadAttention (no biases: the key bias's gradient is zero in exact arithmetic, so its value
    is rounding noise that Adam's normalization would blow up to a step of lr either way), LayerNormalization,
    Dense with gelu, GlobalAveragePooling1D."""
    tokens = keras.Input((6,), dtype="int32")
    x = layers.Embedding(20, 8)(tokens)
    x = layers.LayerNormalization()(x + layers.MultiHeadAttention(2, 4, use_bias=False)(x, x))
    x = layers.GlobalAveragePooling1D()(layers.Dense(8, activation="gelu")(x))
    return keras.Model(tokens, layers.Dense(3)(x))


def train_step(model: keras.Model, loss_fn, optimizer) -> Callable:
    """The ordinary Keras training step, as a user writes it."""

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    return step


def batches(seed: int, x_spec: tf.TensorSpec, y_spec: tf.TensorSpec, x_high: int = 0, y_high: int = 0):
    """batch(k) -> (x, y): fresh normal floats (with exact zeros and ties), or integers below x_high / y_high."""
    rng = np.random.default_rng(seed)

    def draw(spec, high):
        if spec.dtype.is_integer:
            return rng.integers(0, high, spec.shape).astype(spec.dtype.as_numpy_dtype)
        values = rng.standard_normal(spec.shape).astype(spec.dtype.as_numpy_dtype)
        flat = values.reshape(-1)
        flat[::7] = 0  # zeros and ties
        ties = flat[2::11]
        flat[1::11][:ties.size] = ties  # flat[1::11] may hold one more element
        return values

    return lambda k: (draw(x_spec, x_high), draw(y_spec, y_high))


def scaled_difference(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want|: the difference relative to the tensor's own scale."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30)) if want.size else 0.0


def lower_and_compare(step: Callable, specs: list[tf.TensorSpec], batch: Callable, state: list,
                      folder: str, steps: int = K) -> tuple[graph_ir.Graph, dict[str, float], float]:
    """Lowers `step` (after one TF step builds everything), saves it as .air, loads it back, and runs `steps` steps
    of it in graph_ir.Session beside `steps` steps of TF on the same batches. Returns the graph, the scaled
    difference of every state variable the graph holds (`state`: model and optimizer variables) and the largest
    scaled difference of the step's outputs."""
    step(*batch(-1))  # builds the model's and the optimizer's variables, as the first step of a fit does
    graph = graph_ir.from_tensorflow(step, *specs)
    path = os.path.join(folder, f"{graph.name}.air")
    graph.save(path)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.load(path))
    held = captured(graph, state)
    output_difference = 0.0
    for k in range(steps):
        args = batch(k)
        got = session.run_graph(0, list(args))
        want = step(*args)
        want = [want] if isinstance(want, tf.Tensor) else list(tf.nest.flatten(want))
        for g, w in zip(got, want):
            output_difference = max(output_difference, scaled_difference(g, w.numpy()))
    differences = {}
    for v, got in zip(held, session_values(graph, session, held)):
        name, want = state_name(graph, v), v.numpy()
        assert got.dtype == want.dtype and got.shape == want.shape, name
        differences[name] = scaled_difference(got, want)
    return graph, differences, output_difference
