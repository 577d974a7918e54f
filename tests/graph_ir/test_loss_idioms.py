"""Losses and augmentations from papers' and tutorials' code, each in a training step with FusedEmaAdam, K = 3 steps
in the Session against TF (stateless random flips at the end):
CTC (tf.nn.ctc_loss: Empty, TensorScatterAdd, MatrixDiagV3 and a While whose body calls a function by name), and a Gaussian-process-style loss
through a Cholesky factor (Cholesky, MatrixTriangularSolve and, in its gradient, MatrixBandPart and
MatrixSetDiagV3)."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from tests.helpers import train_steps
from tf_plugin.optimizers import FusedEmaAdam

TOLERANCE = 1e-5


def _check(step, specs, batch, state, folder):
    graph, differences, loss = train_steps.lower_and_compare(step, specs, batch, state, folder, steps=3)
    assert loss <= TOLERANCE and max(differences.values()) <= TOLERANCE, (loss, differences)
    return graph


def test_ctc_loss_step(tmp_path):
    keras.utils.set_random_seed(11)
    frames, batch_size, classes, label_length = 6, 3, 5, 2
    model = keras.Sequential([keras.Input((frames, 4)), keras.layers.Dense(8, activation="tanh"),
                              keras.layers.Dense(classes)])
    optimizer = FusedEmaAdam(1e-2)
    optimizer.build(model.trainable_variables)

    @tf.function
    def step(x, labels):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.reduce_mean(tf.nn.ctc_loss(labels, logits, label_length=tf.fill([batch_size], label_length),
                                                 logit_length=tf.fill([batch_size], frames),
                                                 logits_time_major=False, blank_index=0))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    rng = np.random.default_rng(12)
    specs = [tf.TensorSpec((batch_size, frames, 4), tf.float32), tf.TensorSpec((batch_size, label_length), tf.int32)]

    def batch(k):
        return [rng.standard_normal((batch_size, frames, 4)).astype(np.float32),
                rng.integers(1, classes, (batch_size, label_length)).astype(np.int32)]

    graph = _check(step, specs, batch, [*model.variables, *optimizer.variables], str(tmp_path))
    assert graph.nodes_of_type("While")  # the forward-backward recursion, a While whose body calls its cond


def test_cholesky_loss_step(tmp_path):
    """A learned covariance K = L L^T + noise, its Cholesky factor, and the solve of a triangular system."""
    rng = np.random.default_rng(13)
    factor = keras.Variable((np.eye(4) + 0.1 * rng.standard_normal((4, 4))).astype(np.float32))
    optimizer = FusedEmaAdam(1e-2)
    optimizer.build([factor])

    @tf.function
    def step(y):
        with tf.GradientTape() as tape:
            cov = tf.matmul(factor, factor, transpose_b=True) + 0.1 * tf.eye(4)
            chol = tf.linalg.cholesky(cov)
            alpha = tf.linalg.triangular_solve(chol, y, lower=True)
            loss = 0.5 * tf.reduce_sum(tf.square(alpha)) + tf.reduce_sum(tf.math.log(tf.linalg.diag_part(chol)))
        optimizer.apply_gradients([(tape.gradient(loss, factor), factor)])
        return loss

    def batch(k):
        return [rng.standard_normal((4, 2)).astype(np.float32)]

    graph = _check(step, [tf.TensorSpec((4, 2), tf.float32)], batch, [factor, *optimizer.variables], str(tmp_path))
    assert graph.nodes_of_type("Cholesky") and graph.nodes_of_type("MatrixTriangularSolve")


def test_stateless_random_flips_step(tmp_path):
    """Augmentation inside the step as tutorials write it: tf.image.stateless_random_flip_left_right / _up_down with
    a per-step seed (TF's Philox draws, then Round of a uniform: the flip decision), on a small CNN."""
    keras.utils.set_random_seed(14)
    model = keras.Sequential([keras.Input((6, 6, 2)), keras.layers.Conv2D(3, 3), keras.layers.Flatten(),
                              keras.layers.Dense(4)])
    optimizer = FusedEmaAdam(1e-2)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y, seed):
        x = tf.image.stateless_random_flip_left_right(x, seed)
        x = tf.image.stateless_random_flip_up_down(x, seed + 1)
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    rng = np.random.default_rng(15)
    specs = [tf.TensorSpec((5, 6, 6, 2), tf.float32), tf.TensorSpec((5,), tf.int32), tf.TensorSpec((2,), tf.int32)]

    def batch(k):
        return [rng.standard_normal((5, 6, 6, 2)).astype(np.float32), rng.integers(0, 4, 5).astype(np.int32),
                np.array([k + 3, 7 * k + 1], np.int32)]

    graph = _check(step, specs, batch, [*model.variables, *optimizer.variables], str(tmp_path))
    assert graph.nodes_of_type("Round")
