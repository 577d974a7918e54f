"""Training steps traced with unknown dims (None in a TensorSpec, or Keras's None batch) lowered ONCE to a GE
template graph (Data descs with -1), saved as .air and loaded back, then run at several call shapes in one
graph_ir.Session beside the same steps in TensorFlow: every model and optimizer variable and every output within
1e-4 of its own scale after each shape (tests/helpers/dynamic_steps.py). PowerSign and FusedEmaAdam alternate."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import layers

from tests.helpers import dynamic_steps, train_steps
from tf_plugin.optimizers import FusedEmaAdam, PowerSign

XENT = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _labels(n: int) -> tuple[int, ...]:
    return (n,)


def test_mlp_with_a_partial_last_batch(tmp_path):
    """One template serves full batches of 16, a partial last batch of 5 and a single row."""
    keras.utils.set_random_seed(51)
    model, opt = train_steps.mlp(), FusedEmaAdam(0.01, weight_decay=0.01)
    specs = [tf.TensorSpec((None, 12), tf.float32), tf.TensorSpec((None,), tf.int32)]
    shapes = [[(n, 12), _labels(n)] for n in (16, 5, 1)]
    _, worst = dynamic_steps.dynamic_step(
        train_steps.train_step(model, XENT, opt), specs, dynamic_steps.batches(52, specs, (0, 5)), shapes,
        lambda: [*model.variables, *opt.variables], str(tmp_path), steps=3)
    assert len(worst) == 3


def test_cnn_with_batch_normalization_at_an_unknown_batch(tmp_path):
    """BatchNormalization's batch statistics (and its moving averages) follow the call's batch size."""
    keras.utils.set_random_seed(53)
    model, opt = train_steps.cnn(), PowerSign(0.01)
    specs = [tf.TensorSpec((None, 8, 8, 3), tf.float32), tf.TensorSpec((None,), tf.int32)]
    shapes = [[(n, 8, 8, 3), _labels(n)] for n in (6, 3, 1)]
    dynamic_steps.dynamic_step(
        train_steps.train_step(model, XENT, opt), specs, dynamic_steps.batches(54, specs, (0, 5)), shapes,
        lambda: [*model.variables, *opt.variables], str(tmp_path))


def _fully_convolutional() -> keras.Model:
    return keras.Sequential([keras.Input((None, None, 3)), layers.Conv2D(4, 3, padding="same", use_bias=False),
                             layers.BatchNormalization(), layers.Activation("relu"),
                             layers.Conv2D(5, 3, strides=2, padding="same"), layers.GlobalAveragePooling2D(),
                             layers.Dense(3)])


def test_fully_convolutional_net_at_several_image_sizes(tmp_path):
    """Batch, height and width unknown; odd sizes make the stride-2 SAME conv pad unevenly (its pads are taken at
    each call's size), and a size seen before comes back."""
    keras.utils.set_random_seed(55)
    model, opt = _fully_convolutional(), FusedEmaAdam(0.01)
    specs = [tf.TensorSpec((None, None, None, 3), tf.float32), tf.TensorSpec((None,), tf.int32)]
    shapes = [[(n, h, w, 3), _labels(n)] for n, h, w in ((2, 8, 8), (2, 9, 7), (1, 5, 11), (2, 8, 8))]
    dynamic_steps.dynamic_step(train_steps.train_step(model, XENT, opt), specs,
                               dynamic_steps.batches(56, specs, (0, 3)), shapes,
                               lambda: [*model.variables, *opt.variables], str(tmp_path))


def _transformer(causal: bool) -> keras.Model:
    tokens = keras.Input((None,), dtype="int32")
    x = layers.Embedding(20, 8, mask_zero=not causal)(tokens)
    attend = layers.MultiHeadAttention(2, 4, use_bias=False)
    x = layers.LayerNormalization()(x + (attend(x, x, use_causal_mask=True) if causal else attend(x, x)))
    x = layers.GlobalAveragePooling1D()(layers.Dense(8, activation="gelu")(x))
    return keras.Model(tokens, layers.Dense(3)(x))


@pytest.mark.parametrize("causal", [True, False], ids=["causal_mask", "padding_mask"])
def test_transformer_block_on_token_batches_of_unknown_length(causal, tmp_path):
    """A (None, None) token batch at lengths 5, 9 and 3: the causal mask (a lower triangle sized by the length) or
    the padding mask (Embedding(mask_zero=True): tokens end in padding zeros) is built at each call's length."""
    keras.utils.set_random_seed(57)
    model = _transformer(causal)
    opt = FusedEmaAdam(0.01) if causal else PowerSign(0.01)
    specs = [tf.TensorSpec((None, None), tf.int32), tf.TensorSpec((None,), tf.int32)]
    shapes = [[(n, t), _labels(n)] for n, t in ((4, 5), (4, 9), (2, 3))]
    dynamic_steps.dynamic_step(train_steps.train_step(model, XENT, opt), specs,
                               dynamic_steps.batches(58, specs, (20, 3), (not causal, False)), shapes,
                               lambda: [*model.variables, *opt.variables], str(tmp_path))


def _recurrent(kind: str) -> keras.Model:
    """Embedding + LSTM (a classifier), a masked GRU (Embedding(mask_zero=True): the loop skips padding), or a
    bidirectional LSTM tagger (a label per token), each over tokens of unknown length."""
    tokens = keras.Input((None,), dtype="int32")
    x = layers.Embedding(20, 8, mask_zero=kind == "masked_gru")(tokens)
    if kind == "lstm":
        x = layers.LSTM(8)(x)
    elif kind == "masked_gru":
        x = layers.GRU(8)(x)
    else:
        x = layers.Bidirectional(layers.LSTM(4, return_sequences=True))(x)
    return keras.Model(tokens, layers.Dense(3)(x))


@pytest.mark.parametrize("kind", ["lstm", "masked_gru", "bidirectional_tagger"])
def test_recurrent_nets_on_sequences_of_unknown_length(kind, tmp_path):
    """Keras's RNN loop (a While over TensorLists, and its gradient's loop popping what the forward loop pushed)
    at lengths 5, 9 and 3 and two batch sizes: each list's element shape and length are taken at the call's
    shapes, and the masked GRU's Transpose of its bool mask too."""
    keras.utils.set_random_seed(65)
    model = _recurrent(kind)
    opt = PowerSign(0.01) if kind == "lstm" else FusedEmaAdam(0.01)
    tagger = kind == "bidirectional_tagger"
    specs = [tf.TensorSpec((None, None), tf.int32), tf.TensorSpec((None, None) if tagger else (None,), tf.int32)]
    shapes = [[(n, t), (n, t) if tagger else (n,)] for n, t in ((4, 5), (4, 9), (2, 3))]
    dynamic_steps.dynamic_step(train_steps.train_step(model, XENT, opt), specs,
                               dynamic_steps.batches(66, specs, (20, 3), (kind == "masked_gru", False)), shapes,
                               lambda: [*model.variables, *opt.variables], str(tmp_path))


def test_a_step_sized_by_tf_shape(tmp_path):
    """tf.shape plumbing: a reshape to [tf.shape(x)[0], -1], a concat along the unknown axis, tf.range and tf.fill
    sized by tf.shape, and a mean divided by the batch size cast to float."""
    keras.utils.set_random_seed(59)
    dense = layers.Dense(3)
    opt = PowerSign(0.01)

    @tf.function
    def step(x, y):
        n = tf.shape(x)[0]
        with tf.GradientTape() as tape:
            flat = tf.reshape(x, [n, -1])
            both = tf.concat([flat, flat[::-1] * 0.5], axis=0)
            out = dense(both)
            weights = tf.concat([tf.cast(tf.range(n) + 1, tf.float32), tf.fill([n], 2.0)], axis=0)
            target = tf.concat([y, y], axis=0)
            per_row = tf.reduce_sum(tf.square(out - target), axis=1) * weights
            loss = tf.reduce_sum(per_row) / tf.cast(tf.shape(both)[0], tf.float32) / tf.cast(n, tf.float32)
        opt.apply_gradients(zip(tape.gradient(loss, dense.trainable_variables), dense.trainable_variables))
        return loss, tf.reduce_mean(out, axis=0)

    specs = [tf.TensorSpec((None, 4, 3), tf.float32), tf.TensorSpec((None, 3), tf.float32)]
    shapes = [[(n, 4, 3), (n, 3)] for n in (7, 2, 11)]
    dynamic_steps.dynamic_step(step, specs, dynamic_steps.batches(60, specs), shapes,
                               lambda: [*dense.variables, *opt.variables], str(tmp_path), steps=3)


def _compiled_mlp(seed: int, **compile_args) -> keras.Model:
    keras.utils.set_random_seed(seed)
    model = train_steps.mlp()
    model.compile(optimizer=FusedEmaAdam(0.01), loss=XENT, **compile_args)
    return model


def _state(model: keras.Model) -> list:
    return [*model.variables, *model.optimizer.variables, *model.metrics_variables]


def test_keras_train_function_after_fit_on_a_ragged_dataset(tmp_path):
    """fit on 14 rows in batches of 6 ends on a batch of 2, so Keras traces its train function with a None batch;
    from_tensorflow(model.train_function, dataset) lowers it once, and it runs beside model.train_function itself
    at the full batch (6) and the partial one (2)."""
    model = _compiled_mlp(61)
    specs = [tf.TensorSpec((None, 12), tf.float32), tf.TensorSpec((None,), tf.int32)]
    batch = dynamic_steps.batches(62, specs, (0, 5))
    data = tuple(np.concatenate(parts) for parts in zip(*(batch([(n, 12), (n,)]) for n in (6, 6, 2))))
    ragged = tf.data.Dataset.from_tensor_slices(data).batch(6)
    model.fit(ragged, epochs=1, verbose=0, shuffle=False)
    graphs = dynamic_steps.lower_template(model.train_function, specs, str(tmp_path), ragged)

    def tf_step(x, y):
        return model.train_function(iter(tf.data.Dataset.from_tensors((x, y))))

    dynamic_steps.compare_at_shapes(graphs, tf_step, batch, [[(n, 12), (n,)] for n in (6, 2, 6)], _state(model))


def test_train_step_with_compiled_metrics_at_three_batch_sizes(tmp_path):
    """model.train_step in a tf.function traced with a None batch: its loss and its compiled accuracy metric (a
    running mean whose count grows by each call's batch size) match TF at batches 8, 3 and 5."""
    model = _compiled_mlp(63, metrics=["accuracy"])

    @tf.function
    def step(x, y):
        return model.train_step((x, y))

    specs = [tf.TensorSpec((None, 12), tf.float32), tf.TensorSpec((None,), tf.int32)]
    shapes = [[(n, 12), (n,)] for n in (8, 3, 5)]
    graph, _ = dynamic_steps.dynamic_step(step, specs, dynamic_steps.batches(64, specs, (0, 5)), shapes,
                                          lambda: _state(model), str(tmp_path))
    assert len(graph.outputs) == 2  # loss and accuracy
