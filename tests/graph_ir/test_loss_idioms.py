"""Losses and augmentations from papers' and tutorials' code, each in a training step with FusedEmaAdam, K = 3 steps
in the Session against TF (stateless random flips at the end):
CTC (tf.nn.ctc_loss: Empty, TensorScatterAdd, MatrixDiagV3 and a While whose body calls a function by name), and a Gaussian-process-style loss
through a Cholesky factor (Cholesky, MatrixTriangularSolve and, in its gradient, MatrixBandPart and
MatrixSetDiagV3), and a multi-resolution STFT loss as speech and audio models train with (tf.signal.stft: RFFT,
ComplexAbs, and in its gradient IRFFT, complex Mul and DivNoNan)."""

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


def test_multi_resolution_stft_loss_step(tmp_path):
    """A learned filter on a signal, trained so that its spectrograms at two resolutions (spectral convergence and
    log magnitude, as in Parallel WaveGAN's loss) match a target's, plus a reconstruction through tf.signal.inverse_stft.
    The log magnitude's difference is squared and its floor 1e-2: Parallel WaveGAN's |log| with a 1e-7 floor has a
    gradient that jumps with the sign of a near-tie and grows as 1/|X| on near-empty bins, so float32 rounding of the
    transform (TF's DUCC against the Session's, 1.5e-7 apart) would move the biases by 1e-3 of their scale in 3 steps
    on either side, a property of that loss, not of the lowering. The convolutions have no bias for the same reason: a
    bias's gradient is a sum over the 160 positions that cancels to a small part of the largest gradient, where the
    transforms' rounding is 1e-5 of its own scale (the first call's gradients agree within 4e-7 of the largest)."""
    rng = np.random.default_rng(16)
    model = keras.Sequential([keras.Input((160, 1)),
                              keras.layers.Conv1D(4, 5, padding="same", activation="tanh", use_bias=False),
                              keras.layers.Conv1D(1, 3, padding="same", use_bias=False)])
    optimizer = FusedEmaAdam(1e-2)
    optimizer.build(model.trainable_variables)
    resolutions = ((32, 8, 32), (64, 16, 64))

    @tf.function
    def step(x, target):
        with tf.GradientTape() as tape:
            y = tf.squeeze(model(x[..., None], training=True), -1)
            loss = 0.0
            for frame, hop, length in resolutions:
                got = tf.abs(tf.signal.stft(y, frame, hop, length))
                want = tf.abs(tf.signal.stft(target, frame, hop, length))
                loss += tf.norm(want - got) / (tf.norm(want) + 1e-6)
                loss += tf.reduce_mean(tf.square(tf.math.log(got + 1e-2) - tf.math.log(want + 1e-2)))
            back = tf.signal.inverse_stft(tf.signal.stft(y, 32, 8, 32), 32, 8, 32)
            loss += 0.1 * tf.reduce_mean(tf.square(back - y[:, :back.shape[1]]))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    specs = [tf.TensorSpec((2, 160), tf.float32), tf.TensorSpec((2, 160), tf.float32)]

    def batch(k):
        x = rng.standard_normal((2, 160)).astype(np.float32)
        x[:, ::9] = 0
        return [x, np.sin(np.arange(160) * 0.3 * (k + 2))[None].repeat(2, 0).astype(np.float32)]

    graph = _check(step, specs, batch, [*model.variables, *optimizer.variables], str(tmp_path))
    assert graph.nodes_of_type("RFFT") and graph.nodes_of_type("IRFFT") and graph.nodes_of_type("ComplexAbs")
