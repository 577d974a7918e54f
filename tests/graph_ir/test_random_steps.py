"""A GAN training step as keras.io's DCGAN and WGAN-GP examples write it: latent vectors from tf.random.normal and
label noise from tf.random.uniform drawn inside the step (TF's stateful RandomStandardNormal and RandomUniform),
seeded by keras.utils.set_random_seed, lowered with graph_ir.from_tensorflow and run K steps in graph_ir.Session
beside K steps of TF.

TF makes a function's kernels, and so their Philox generators (GuardedPhiloxRandom::Init(seed, seed2)), at its first
call; the lowered graph's streams start at the seeds when it is added. The step is called once first (it builds the
optimizers' variables), so TF's compared steps are a fresh trace of the same step from the same global seed: the
same seed attributes, generators made at its first compared call, and the variables as the graph captured them."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from keras import layers

import graph_ir
from tests.helpers.lowering import captured, session_values, state_name
from tests.helpers.train_steps import K, scaled_difference
from tf_plugin.optimizers import FusedEmaAdam

BATCH, LATENT, FEATURES = 6, 5, 7
TOLERANCE = 1e-5


def _gan_step(generator, discriminator, d_optimizer, g_optimizer):
    loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)

    def train_step(real):
        batch_size = tf.shape(real)[0]
        latent = tf.random.normal(shape=(batch_size, LATENT))
        generated = generator(latent)
        combined = tf.concat([generated, real], axis=0)
        labels = tf.concat([tf.ones((batch_size, 1)), tf.zeros((batch_size, 1))], axis=0)
        labels += 0.05 * tf.random.uniform(tf.shape(labels))  # label noise, as keras.io's DCGAN adds it
        with tf.GradientTape() as tape:
            d_loss = loss_fn(labels, discriminator(combined))
        grads = tape.gradient(d_loss, discriminator.trainable_weights)
        d_optimizer.apply_gradients(zip(grads, discriminator.trainable_weights))
        latent = tf.random.normal(shape=(batch_size, LATENT))
        misleading = tf.zeros((batch_size, 1))
        with tf.GradientTape() as tape:
            g_loss = loss_fn(misleading, discriminator(generator(latent)))
        grads = tape.gradient(g_loss, generator.trainable_weights)
        g_optimizer.apply_gradients(zip(grads, generator.trainable_weights))
        return d_loss, g_loss

    return train_step


def test_gan_step_draws_tfs_latents_and_label_noise(tmp_path):
    try:
        keras.utils.set_random_seed(1337)
        generator = keras.Sequential([keras.Input((LATENT,)), layers.Dense(8, activation="relu"),
                                      layers.Dense(FEATURES)])
        discriminator = keras.Sequential([keras.Input((FEATURES,)), layers.Dense(8), layers.LeakyReLU(0.2),
                                          layers.Dense(1)])
        d_optimizer, g_optimizer = keras.optimizers.Adam(3e-3), FusedEmaAdam(3e-3)
        train_step = _gan_step(generator, discriminator, d_optimizer, g_optimizer)
        rng = np.random.default_rng(3)
        real = [rng.standard_normal((BATCH, FEATURES)).astype(np.float32) for _ in range(K + 1)]
        tf.function(train_step)(real[-1])  # builds the optimizers' variables, as a fit's first step does
        step = tf.function(train_step)
        graph = graph_ir.from_tensorflow(step, tf.TensorSpec((BATCH, FEATURES), tf.float32))
        types = [n.type for n in graph.nodes.values()]
        assert types.count("RandomStandardNormal") == 2 and types.count("RandomUniform") == 1
        path = str(tmp_path / "gan.air")
        graph.save(path)
        session = graph_ir.Session()
        session.add_graph(0, graph_ir.load(path))
        state = [*generator.variables, *discriminator.variables, *d_optimizer.variables, *g_optimizer.variables]
        held = captured(graph, state)
        tf_step = tf.function(train_step)  # a fresh trace of the same seeds: generators made at its first call
        for k in range(K):
            got = session.run_graph(0, [real[k]])
            want = [t.numpy() for t in tf_step(real[k])]
            for g, w in zip(got, want, strict=True):
                assert scaled_difference(g, w) <= TOLERANCE, (k, g, w)
        differences = {state_name(graph, v): scaled_difference(got, v.numpy())
                       for v, got in zip(held, session_values(graph, session, held))}
        assert len(differences) >= 10 and max(differences.values()) <= TOLERANCE, differences
    finally:
        tf.random.set_seed(None)
