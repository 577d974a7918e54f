"""Training-step idioms lowered whole and run K steps in graph_ir.Session beside K steps in TensorFlow (the harness of
tests/graph_ir/test_lowering_steps.py): a custom tf.function step that clips its gradients with
tf.clip_by_global_norm (L2Loss, Sqrt, the clip's Minimum and RealDiv) and puts tf.norm in its loss (Sqrt's gradient
is SqrtGrad), with FusedEmaAdam and PowerSign; and, under mixed_bfloat16 with FusedEmaAdam, the attention block
(MultiHeadAttention, LayerNormalization, Dense with gelu) and a Llama-style block (RMSNorm, SwiGLU), their
elementwise ops in bfloat16 (AddV2 onto GE Add).

Tolerances: every variable within 1e-5 of its own scale after K steps in float32 (as the other step tests: sums in
another order, sqrt/exp/erf not bitwise Eigen's); 2e-2 with mixed_bfloat16 (bfloat16 keeps 8 significant bits: an
ulp is 2^-8 = 3.9e-3 of a value, and a few roundings apart compound over the block and K steps)."""

from __future__ import annotations

import keras
import pytest
import tensorflow as tf

from tests.helpers import train_steps
from tf_plugin.optimizers import FusedEmaAdam, PowerSign

OPTIMIZERS = {"powersign": lambda: PowerSign(0.01), "fused_ema_adam": lambda: FusedEmaAdam(0.01, weight_decay=0.01)}
FLOAT32_TOLERANCE = 1e-5
BFLOAT16_TOLERANCE = 2e-2


def clipped_step(model: keras.Model, optimizer, clip_norm: float):
    """A custom step as users write it: MSE plus a tf.norm penalty on the outputs' rows (sqrt distances), gradients
    clipped by their global norm before the update."""
    mse = keras.losses.MeanSquaredError()

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            distance = tf.reduce_mean(tf.norm(out - y, axis=-1))
            loss = mse(y, out) + 0.01 * distance + 1e-3 * tf.norm(model.trainable_variables[0])
        grads = tape.gradient(loss, model.trainable_variables)
        clipped, global_norm = tf.clip_by_global_norm(grads, clip_norm)
        optimizer.apply_gradients(zip(clipped, model.trainable_variables))
        return loss, global_norm

    return step


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_clip_by_global_norm_and_norm_loss_step(optimizer, tmp_path):
    keras.utils.set_random_seed(11)
    model = keras.Sequential([keras.Input((12,)), keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(4)])
    opt = OPTIMIZERS[optimizer]()
    opt.build(model.trainable_variables)
    step = clipped_step(model, opt, clip_norm=0.5)
    specs = [tf.TensorSpec((6, 12), tf.float32), tf.TensorSpec((6, 4), tf.float32)]
    batch = train_steps.batches(12, *specs)
    graph, differences, outputs = train_steps.lower_and_compare(
        step, specs, batch, [*model.variables, *opt.variables], str(tmp_path))
    assert step(*batch(train_steps.K))[1] > 0.5  # the clip acts: the global norm (compared above) is past clip_norm
    types = {n.type for n in graph.nodes.values()}
    assert {"L2Loss", "Sqrt", "SqrtGrad", "Minimum"} <= types, sorted(types)
    assert len(differences) == len(model.variables) + len(opt.variables) - len(graph.frozen_variables)
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert outputs <= FLOAT32_TOLERANCE


def bfloat16_attention() -> keras.Model:
    """tests/helpers/train_steps.py's attention block (Embedding, MultiHeadAttention, LayerNormalization, Dense with
    gelu) built under the mixed_bfloat16 policy, which is reset afterwards."""
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        return train_steps.attention()
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_mixed_bfloat16_attention_block_step(tmp_path):
    keras.utils.set_random_seed(13)
    model, opt = bfloat16_attention(), FusedEmaAdam(0.01, weight_decay=0.01)
    assert keras.mixed_precision.global_policy().name == "float32"
    opt.build(model.trainable_variables)
    step = train_steps.train_step(model, keras.losses.MeanSquaredError(), opt)
    specs = [tf.TensorSpec((4, 6), tf.int32), tf.TensorSpec((4, 3), tf.float32)]
    graph, differences, loss = train_steps.lower_and_compare(
        step, specs, train_steps.batches(14, *specs, x_high=20), [*model.variables, *opt.variables], str(tmp_path))
    bfloat16 = {n.type for n in graph.nodes.values() if n.output_descs and n.output_descs[0].dtype.name == "bfloat16"}
    assert {"Add", "BatchMatMulV2", "Mul"} <= bfloat16, sorted(bfloat16)
    assert "ApplyFusedEmaAdam" in {n.type for n in graph.nodes.values()}
    assert len(differences) == len(model.variables) + len(opt.variables) - len(graph.frozen_variables)
    assert max(differences.values()) <= BFLOAT16_TOLERANCE, differences
    assert loss <= BFLOAT16_TOLERANCE


class RMSNorm(keras.layers.Layer):
    """Llama's normalization, in the layer's compute dtype: x * rsqrt(mean(x^2) + eps) * scale."""

    def build(self, shape):
        self.scale = self.add_weight(shape=shape[-1:], initializer="ones")

    def call(self, x):
        return x * tf.math.rsqrt(tf.reduce_mean(tf.square(x), -1, keepdims=True) + 1e-6) * tf.cast(self.scale, x.dtype)


def bfloat16_llama_block() -> keras.Model:
    """A Llama-style feed-forward block under mixed_bfloat16 (policy reset afterwards): RMSNorm, a SiLU-gated Dense
    pair (SwiGLU), a residual, GlobalAveragePooling1D, Dense."""
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        x = keras.Input((6, 8))
        h = RMSNorm()(x)
        gated = keras.layers.Dense(12, activation="silu")(h) * keras.layers.Dense(12)(h)
        y = x + keras.layers.Dense(8)(gated)
        return keras.Model(x, keras.layers.Dense(3)(keras.layers.GlobalAveragePooling1D()(RMSNorm()(y))))
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_mixed_bfloat16_llama_style_block_step(tmp_path):
    keras.utils.set_random_seed(15)
    model, opt = bfloat16_llama_block(), FusedEmaAdam(0.01, weight_decay=0.01)
    opt.build(model.trainable_variables)
    step = train_steps.train_step(model, keras.losses.MeanSquaredError(), opt)
    specs = [tf.TensorSpec((4, 6, 8), tf.float32), tf.TensorSpec((4, 3), tf.float32)]
    graph, differences, loss = train_steps.lower_and_compare(
        step, specs, train_steps.batches(16, *specs), [*model.variables, *opt.variables], str(tmp_path))
    bfloat16 = {n.type for n in graph.nodes.values() if n.output_descs and n.output_descs[0].dtype.name == "bfloat16"}
    assert {"Rsqrt", "RsqrtGrad", "ReduceMean", "Square", "Sigmoid", "Mul", "Add"} <= bfloat16, sorted(bfloat16)
    assert len(differences) == len(model.variables) + len(opt.variables) - len(graph.frozen_variables)
    assert max(differences.values()) <= BFLOAT16_TOLERANCE, differences
    assert loss <= BFLOAT16_TOLERANCE
