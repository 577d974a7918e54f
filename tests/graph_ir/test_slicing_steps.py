"""Whole training steps that need the slicing and resize families, lowered to GE as one graph and run K steps in
graph_ir.Session beside K steps in TensorFlow with FusedEmaAdam: a Keras CNN with ZeroPadding2D, Conv2D, Cropping2D,
Concatenate, UpSampling2D (nearest and bilinear) and Resizing (nearest), a Keras dilated Conv1D (SpaceToBatchND / BatchToSpaceND), and
a custom step with tf.pad (constant and mirrored), tf.split, tf.unstack, tf.gather_nd, tf.reverse and tf.cumsum.
Tolerance: every weight, slot and counter and the loss within 1e-5 of its own scale (FLOAT32_TOLERANCE: the
convolutions and reductions are not bitwise Eigen's; the slicing and resize ops themselves are). Measured (K = 3):
state within 4.2e-7 (CNN), 3.7e-7 (Conv1D), 1.9e-9 (custom step) scaled; the losses within 2.1e-7."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from keras import layers

from tests.graph_ir.test_lowering_steps import FLOAT32_TOLERANCE, SPARSE_XENT
from tests.helpers import train_steps
from tf_plugin.optimizers import FusedEmaAdam


def _types(graph) -> set[str]:
    return {n.type for n in graph.nodes.values()}


def _compare(model, loss_fn, specs, batch, tmp_path):
    optimizer = FusedEmaAdam(0.01, weight_decay=0.01)
    step = train_steps.train_step(model, loss_fn, optimizer)
    graph, differences, loss = train_steps.lower_and_compare(step, specs, batch,
                                                             [*model.variables, *optimizer.variables], str(tmp_path))
    assert len(differences) >= len(model.trainable_variables)
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert loss <= FLOAT32_TOLERANCE
    return graph


def test_padding_cropping_concatenate_upsampling_cnn_step(tmp_path):
    keras.utils.set_random_seed(30)
    x = keras.Input((8, 8, 3))
    a = layers.ZeroPadding2D(((1, 2), (0, 1)))(x)  # 11 x 9
    a = layers.Conv2D(4, 3, activation="relu")(a)  # 9 x 7
    a = layers.Cropping2D(((1, 0), (0, 1)))(a)  # 8 x 6
    b = layers.Cropping2D(((0, 0), (1, 1)))(layers.Conv2D(2, 1)(x))  # 8 x 6
    c = layers.Concatenate()([a, b])
    up = layers.Concatenate()([layers.UpSampling2D(2, interpolation="nearest")(c),
                               layers.UpSampling2D((2, 4), interpolation="bilinear")(c)[:, :, 1::2],
                               layers.Resizing(16, 12, interpolation="nearest")(c)])
    y = layers.Dense(5)(layers.GlobalAveragePooling2D()(layers.Conv2D(3, 3, strides=2)(up)))
    specs = [tf.TensorSpec((3, 8, 8, 3), tf.float32), tf.TensorSpec((3,), tf.int32)]
    graph = _compare(keras.Model(x, y), SPARSE_XENT, specs, train_steps.batches(31, *specs, y_high=5), tmp_path)
    assert {"Pad", "Slice", "StridedSliceGrad", "ResizeBilinearV2", "ResizeBilinearV2Grad", "ResizeNearestNeighborV2",
            "ResizeNearestNeighborV2Grad"} <= _types(graph), \
        sorted(_types(graph))


def test_dilated_conv1d_step(tmp_path):
    keras.utils.set_random_seed(32)
    model = keras.Sequential([keras.Input((14, 3)), layers.Conv1D(4, 3, dilation_rate=2, activation="tanh"),
                              layers.Conv1D(4, 2, dilation_rate=3, padding="causal"), layers.Flatten(),
                              layers.Dense(3)])
    specs = [tf.TensorSpec((4, 14, 3), tf.float32), tf.TensorSpec((4, 3), tf.float32)]
    graph = _compare(model, keras.losses.MeanSquaredError(), specs, train_steps.batches(33, *specs), tmp_path)
    assert {"SpaceToBatchND", "BatchToSpaceND"} <= _types(graph), sorted(_types(graph))


def test_custom_step_with_pad_split_gather_nd_reverse_cumsum(tmp_path):
    keras.utils.set_random_seed(34)
    w = tf.Variable(np.random.default_rng(35).standard_normal((6, 4)).astype(np.float32), name="w")
    v = tf.Variable(np.random.default_rng(36).standard_normal((5, 4)).astype(np.float32), name="v")
    optimizer = FusedEmaAdam(0.01)
    picks = tf.constant([[0, 1], [4, 3], [0, 1], [5, 0], [2, 2]])

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            h = tf.pad(x, [[1, 0], [0, 2]]) @ tf.pad(w, [[0, 2], [0, 0]], "REFLECT")  # [9, 4]
            top, middle, bottom = tf.split(h, [3, 4, 2], axis=0)
            left, right = tf.split(tf.concat([top, bottom], 0) * v, 2, axis=1)
            rows = tf.unstack(tf.reverse(left, [0]) + tf.cumsum(right, axis=0, exclusive=True))
            gathered = tf.gather_nd(tf.convert_to_tensor(w), picks)  # (on w itself: ResourceGatherNd)
            mirrored = tf.pad(middle, [[1, 1], [2, 0]], "SYMMETRIC")
            pred = tf.reduce_sum(tf.stack(rows[::2]), 0) + tf.reduce_sum(gathered) + tf.reduce_mean(mirrored)
            loss = tf.reduce_mean(tf.square(pred - y))
        grads = tape.gradient(loss, [w, v])
        optimizer.apply_gradients(zip(grads, [w, v]))
        return loss

    specs = [tf.TensorSpec((8, 6), tf.float32), tf.TensorSpec((2,), tf.float32)]
    graph, differences, loss = train_steps.lower_and_compare(step, specs, train_steps.batches(37, *specs),
                                                             [w, v, *optimizer.variables], str(tmp_path))
    assert {"Pad", "MirrorPad", "MirrorPadGrad", "SplitV", "Split", "Unpack", "GatherNd", "ScatterNd", "ReverseV2",
            "Cumsum"} <= _types(graph), sorted(_types(graph))
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert loss <= FLOAT32_TOLERANCE
