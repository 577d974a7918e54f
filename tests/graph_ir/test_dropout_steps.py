"""Whole training steps with Keras's random layers, lowered to GE as one graph and run K steps in graph_ir.Session
beside K steps in TensorFlow on the same batches, with PowerSign and FusedEmaAdam: an MLP with Dropout(0.3), a CNN
with GaussianNoise and SpatialDropout2D, and an attention block with MultiHeadAttention(dropout=0.1) and Dropout(0.1).

Keras 3 draws from a SeedGenerator variable each step (keras/src/random/seed_generator.py: read the int64 state, then
assign state + [0, 1]) through StatelessRandomGetKeyCounter and StatelessRandomUniformV2 (StatelessRandomNormalV2 for
GaussianNoise). Each step returns its loss and the mask a Dropout layer kept; the test asserts every step's mask is
bitwise TF's, that the masks differ from step to step (the seed advances, in the session as in TF), that the seed
states are TF's exactly, and every variable and the loss within docs/lowering.md's 1e-5 whole-step tolerance: a different
draw would fail all of these. Measured (K = 3): every variable within 5e-7 of its scale of TF's, the loss within 2e-7, masks identical."""

from __future__ import annotations

import itertools
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import layers

import graph_ir
from tests.graph_ir.test_lowering_steps import FLOAT32_TOLERANCE, OPTIMIZERS, SPARSE_XENT
from tests.helpers import train_steps
from tests.helpers.lowering import captured, session_values, state_name


def mlp() -> keras.Model:
    """tanh before each Dropout, so the only zeros after it are dropped units (the returned mask)."""
    x = keras.Input((12,))
    dropped = layers.Dropout(0.3)(layers.Dense(16, activation="tanh")(x))
    h = layers.Dropout(0.3)(layers.Dense(8, activation="tanh")(dropped))
    return keras.Model(x, [layers.Dense(5)(h), dropped])


def cnn() -> keras.Model:
    x = keras.Input((8, 8, 3))
    h = layers.Conv2D(4, 3, padding="same", activation="tanh")(layers.GaussianNoise(0.1)(x))
    dropped = layers.SpatialDropout2D(0.3)(h)
    out = layers.Dense(5)(layers.Flatten()(layers.MaxPooling2D()(dropped)))
    return keras.Model(x, [out, dropped])


def attention() -> keras.Model:
    """An encoder block: attention with dropout on its weights, Dropout on its output, residual, LayerNormalization,
    a gelu Dense (no attention biases, as train_steps.attention explains)."""
    tokens = keras.Input((6,), dtype="int32")
    x = layers.Embedding(20, 8)(tokens)
    dropped = layers.Dropout(0.1)(layers.MultiHeadAttention(2, 4, use_bias=False, dropout=0.1)(x, x))
    x = layers.LayerNormalization()(x + dropped)
    x = layers.GlobalAveragePooling1D()(layers.Dense(8, activation="gelu")(x))
    return keras.Model(tokens, [layers.Dense(3)(x), dropped])


def masked_step(model: keras.Model, loss_fn, optimizer):
    """The ordinary training step, also returning what the model's Dropout kept (its nonzero outputs)."""

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            out, dropped = model(x, training=True)
            loss = loss_fn(y, out)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss, tf.not_equal(dropped, 0)

    return step


def seed_states(model: keras.Model) -> list:
    return [v for v in model.variables if "seed_generator_state" in v.path]


def run_side_by_side(step, specs, batch, state, folder: str):
    """Lowers `step` (after one TF step builds everything), saves it as .air, loads it back and runs K steps of it
    beside K steps of TF: asserts each step's mask bitwise; returns the session, the graph, TF's masks, the loss's
    largest scaled difference and every state variable's."""
    step(*batch(-1))
    graph = graph_ir.from_tensorflow(step, *specs)
    path = os.path.join(folder, f"{graph.name}.air")
    graph.save(path)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.load(path))
    masks, loss_difference = [], 0.0
    for k in range(train_steps.K):
        args = batch(k)
        got_loss, got_mask = session.run_graph(0, list(args))
        want_loss, want_mask = (t.numpy() for t in step(*args))
        assert got_mask.dtype == np.bool_ and got_mask.shape == want_mask.shape
        np.testing.assert_array_equal(got_mask, want_mask, err_msg=f"step {k}: the session dropped other units")
        masks.append(want_mask)
        loss_difference = max(loss_difference, train_steps.scaled_difference(got_loss, want_loss))
    held = captured(graph, state)
    differences = {state_name(graph, v): train_steps.scaled_difference(got, v.numpy())
                   for v, got in zip(held, session_values(graph, session, held))}
    return session, graph, masks, loss_difference, differences


def assert_the_draws_are_tfs(model, graph, session, masks, loss, differences, keep: float) -> None:
    for earlier, later in itertools.pairwise(masks):
        assert np.any(earlier != later), "the mask did not change between steps: the seed did not advance"
    kept = np.mean(masks)
    assert abs(kept - keep) <= 0.2, kept  # a mask, not all kept or all dropped
    seeds = seed_states(model)
    assert seeds and all(graph.variable_name(v) in differences for v in seeds)
    for v, got in zip(seeds, session_values(graph, session, seeds)):
        np.testing.assert_array_equal(got, v.numpy())  # the state advanced by one draw per step, as in TF
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert loss <= FLOAT32_TOLERANCE


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_mlp_with_dropout(optimizer, tmp_path):
    keras.utils.set_random_seed(11)
    model, opt = mlp(), OPTIMIZERS[optimizer]()
    specs = [tf.TensorSpec((6, 12), tf.float32), tf.TensorSpec((6,), tf.int32)]
    batch = train_steps.batches(12, *specs, y_high=5)
    step = masked_step(model, SPARSE_XENT, opt)
    session, graph, masks, loss, differences = run_side_by_side(step, specs, batch, [*model.variables,
                                                                                     *opt.variables], str(tmp_path))
    types = {n.type for n in graph.nodes.values()}
    assert {"StatelessRandomGetKeyCounter", "StatelessRandomUniformV2", "GreaterEqual", "SelectV2", "FloorMod",
            "Assign"} <= types
    assert_the_draws_are_tfs(model, graph, session, masks, loss, differences, keep=0.7)
    # The comparison sees a different draw: from another seed state the session drops other units than TF.
    first = seed_states(model)[0]
    session.set_variables({graph.variable_name(first): first.numpy() + np.array([0, 5], np.int64)})
    _, other = session.run_graph(0, list(batch(99)))
    assert np.any(other != step(*batch(99))[1].numpy())


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_cnn_with_gaussian_noise_and_spatial_dropout(optimizer, tmp_path):
    """SpatialDropout2D draws one uniform per (sample, channel), broadcast over the pixels; GaussianNoise draws
    normals (an ulp of libm apart now and then: tests/graph_ir/test_random_ops.py), well inside the tolerance."""
    keras.utils.set_random_seed(12)
    model, opt = cnn(), OPTIMIZERS[optimizer]()
    specs = [tf.TensorSpec((4, 8, 8, 3), tf.float32), tf.TensorSpec((4,), tf.int32)]
    step = masked_step(model, SPARSE_XENT, opt)
    session, graph, masks, loss, differences = run_side_by_side(
        step, specs, train_steps.batches(13, *specs, y_high=5), [*model.variables, *opt.variables], str(tmp_path))
    assert {"StatelessRandomNormalV2", "StatelessRandomUniformV2"} <= {n.type for n in graph.nodes.values()}
    for mask in masks:  # whole channels dropped
        assert np.all(mask == mask[:, :1, :1, :])
    assert_the_draws_are_tfs(model, graph, session, masks, loss, differences, keep=0.7)


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_attention_block_with_dropout(optimizer, tmp_path):
    keras.utils.set_random_seed(14)
    model, opt = attention(), OPTIMIZERS[optimizer]()
    specs = [tf.TensorSpec((4, 6), tf.int32), tf.TensorSpec((4, 3), tf.float32)]
    step = masked_step(model, keras.losses.MeanSquaredError(), opt)
    session, graph, masks, loss, differences = run_side_by_side(
        step, specs, train_steps.batches(15, *specs, x_high=20), [*model.variables, *opt.variables], str(tmp_path))
    draws = [n for n in graph.nodes.values() if n.type == "StatelessRandomUniformV2"]
    assert len(draws) == 2  # the attention weights' dropout and the output's
    assert len(seed_states(model)) == 2
    assert_the_draws_are_tfs(model, graph, session, masks, loss, differences, keep=0.9)
