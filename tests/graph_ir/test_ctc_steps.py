"""keras.backend.ctc_batch_cost as the keras.io CTC examples call it (speech recognition, captcha OCR): dense labels
turned sparse with tf.compat.v1.boolean_mask (TF's Where: its count is the number of labels, known only from the
label lengths; graph_ir/runtime/segments.py), then CTCLoss. K (3) training steps, with label lengths that change
from batch to batch, against TF: the loss and every variable within 1e-5 of their scale (CTCLoss's own bounds:
tests/graph_ir/test_ctc.py)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import layers
from keras.src.legacy import backend

from tests.helpers.train_steps import lower_and_compare

BATCH, TIME, FEATURES, CLASSES, WIDTH = 4, 12, 6, 7, 5  # the blank is the last class, as ctc_batch_cost has it


def _model() -> keras.Model:
    return keras.Sequential([keras.Input((TIME, FEATURES)), layers.Conv1D(8, 3, padding="same", activation="relu"),
                             layers.Bidirectional(layers.GRU(4, return_sequences=True)),
                             layers.Dense(CLASSES, activation="softmax")])


def _asr_loss(y_true, y_pred):
    """The speech-recognition example's CTCLoss: every label row counted at its full width, padding included."""
    batch_len = tf.cast(tf.shape(y_true)[0], dtype="int64")
    input_length = tf.cast(tf.shape(y_pred)[1], dtype="int64") * tf.ones(shape=(batch_len, 1), dtype="int64")
    label_length = tf.cast(tf.shape(y_true)[1], dtype="int64") * tf.ones(shape=(batch_len, 1), dtype="int64")
    return backend.ctc_batch_cost(y_true, y_pred, input_length, label_length)


@pytest.mark.parametrize("example", ["speech_recognition", "ocr_label_lengths"])
def test_ctc_batch_cost_training_steps_as_tf(example, tmp_path):
    keras.utils.set_random_seed(50)
    model, optimizer = _model(), keras.optimizers.Adam(1e-2)

    @tf.function
    def step(x, labels, label_length):
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            if example == "speech_recognition":
                loss = tf.reduce_mean(_asr_loss(labels, y_pred))
            else:  # the OCR example's CTCLayer: each sample's own label length
                input_length = TIME * tf.ones((tf.shape(y_pred)[0], 1), dtype="int64")
                loss = tf.reduce_mean(backend.ctc_batch_cost(labels, y_pred, input_length, label_length))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    rng = np.random.default_rng(51)

    def batch(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x = rng.standard_normal((BATCH, TIME, FEATURES)).astype(np.float32)
        x.reshape(-1)[::9] = 0
        labels = rng.integers(0, CLASSES - 1, (BATCH, WIDTH)).astype(np.int32)
        labels[:, 1] = labels[:, 0]  # repeats
        lengths = rng.integers(1, WIDTH + 1, (BATCH, 1)).astype(np.int32)  # another count of labels each batch
        return x, labels, lengths

    specs = [tf.TensorSpec((BATCH, TIME, FEATURES)), tf.TensorSpec((BATCH, WIDTH), tf.int32),
             tf.TensorSpec((BATCH, 1), tf.int32)]
    graph, differences, output_difference = lower_and_compare(step, specs, batch, [*model.variables,
                                                                                   *optimizer.variables],
                                                              str(tmp_path))
    types = {n.type for g in (graph, *graph.subgraphs.values()) for n in g.nodes.values()}
    assert {"Where", "CTCLoss"} <= types
    assert output_difference <= 1e-5
    assert differences and max(differences.values()) <= 1e-5, differences
