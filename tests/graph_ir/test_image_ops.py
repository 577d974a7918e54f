"""ImageProjectiveTransformV3 (graph_ir/lowering/ops/image.py onto GE's ImageProjectiveTransformV2) against TF's CPU
kernel, bitwise: every fill mode and both interpolations, rotations, zooms, shears, translations and projective
transforms (including a projection that reaches 0), a shared transform and one per image, output sizes other than
the input's, images of one row or column, and float32, float16, float64, int32 and uint8 images with a fill value;
then Keras's RandomRotation, RandomZoom and RandomTranslation in a training step (their angles drawn by TF's
stateless Philox in the Session, as TF draws them), K = 3 steps against TF."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from tests.graph_ir.test_activation_ops import assert_matches, run_lowered
from tests.helpers import train_steps
from tf_plugin.optimizers import FusedEmaAdam

TESTED = ("ImageProjectiveTransformV3", "ImageProjectiveTransformV2")  # bitwise (test_family_ops.PER_OP_TESTS)


def _transforms(rng, batch: int) -> np.ndarray:
    """Rotations about the centre with zoom and shear, translations (some by whole pixels, some by halves: ties of
    std::round) and a projective row whose denominator reaches 0 at one output pixel."""
    out = []
    for k in range(batch):
        angle, zoom = rng.uniform(-np.pi, np.pi), rng.uniform(0.6, 1.6)
        c, s = np.cos(angle) * zoom, np.sin(angle) * zoom
        out.append([c, -s, rng.uniform(-4, 4), s + rng.uniform(-0.2, 0.2), c, rng.integers(-3, 3) + 0.5, 0, 0])
    out[0] = [1, 0, 2.5, 0, 1, -1.5, 0, 0]
    if batch > 2:
        out[2][6:] = [-0.25, 0.0]  # 1 - 0.25 x = 0 at x = 4
    return np.array(out, np.float32)


def _images(rng, shape, dtype) -> np.ndarray:
    x = rng.standard_normal(shape) * 50
    x.reshape(-1)[::7] = 0
    return (np.abs(x) % 256).astype(dtype) if dtype == np.uint8 else x.astype(dtype)


def _transform(interpolation: str, fill_mode: str, output_shape=None):
    def fn(images, transforms, fill_value):
        size = output_shape or tuple(images.shape[1:3])
        return tf.raw_ops.ImageProjectiveTransformV3(
            images=images, transforms=transforms, output_shape=tf.constant(size, tf.int32), fill_value=fill_value,
            interpolation=interpolation, fill_mode=fill_mode)

    return fn


@pytest.mark.parametrize("fill_mode", ["REFLECT", "WRAP", "CONSTANT", "NEAREST"])
@pytest.mark.parametrize("interpolation", ["NEAREST", "BILINEAR"])
def test_every_mode_runs_like_tensorflow(interpolation, fill_mode):
    rng = np.random.default_rng(len(fill_mode) * 7 + len(interpolation))
    for shape, output_shape in (((4, 9, 7, 3), None), ((3, 5, 6, 2), (8, 4)), ((3, 1, 6, 1), None), ((3, 6, 1, 2), None)):
        images = _images(rng, shape, np.float32)
        graph, got, want = run_lowered(_transform(interpolation, fill_mode, output_shape),
                                       [images, _transforms(rng, shape[0]), np.float32(-3.5)])
        assert graph.nodes_of_type("ImageProjectiveTransformV2")
        assert_matches(got[0], want[0], 0, f"{interpolation} {fill_mode} {shape}")


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.uint8])
def test_other_image_dtypes_and_one_shared_transform(dtype):
    rng = np.random.default_rng(5)
    for interpolation in ("NEAREST", "BILINEAR"):
        images = _images(rng, (2, 7, 8, 3), dtype)
        _, got, want = run_lowered(_transform(interpolation, "CONSTANT"),
                                   [images, _transforms(rng, 2)[1:], np.float32(7.75)])
        assert_matches(got[0], want[0], 0, f"{interpolation} {np.dtype(dtype).name}")


def test_refusals_name_the_node_and_field():
    fn = tf.function(lambda x, t, size: tf.raw_ops.ImageProjectiveTransformV3(
        images=x, transforms=t, output_shape=size, fill_value=0.0, interpolation="BILINEAR"))
    with pytest.raises(graph_ir.GraphError, match=r"'output_shape' must come from a Const"):
        graph_ir.from_tensorflow(fn, tf.TensorSpec((1, 4, 4, 1)), tf.TensorSpec((1, 8)), tf.TensorSpec((2,), tf.int32))
    graph = graph_ir.Graph("g")
    with graph, pytest.raises(graph_ir.GraphError, match=r"'transforms' has shape \[2, 8\]; expected \[1, 8\] or \[3, 8\]"):
        graph_ir.ops.ImageProjectiveTransformV2(graph_ir.Data(0, "float32", (3, 4, 4, 1), name="x"),
                                                graph_ir.Data(1, "float32", (2, 8), name="t"),
                                                graph_ir.Const(np.array([4, 4], np.int32), name="size"),
                                                interpolation="BILINEAR")


def test_random_augmentation_layers_in_a_training_step(tmp_path):
    """RandomRotation, RandomZoom and RandomTranslation before a small CNN, as image-classification tutorials train:
    the layers draw their transforms from a seed variable each step (stateless Philox, drawn in the Session as TF
    draws it) and warp the batch with ImageProjectiveTransformV3."""
    keras.utils.set_random_seed(21)
    augment = keras.Sequential([keras.layers.RandomRotation(0.2, fill_mode="reflect"),
                                keras.layers.RandomZoom(0.2, fill_mode="nearest"),
                                keras.layers.RandomTranslation(0.1, 0.1, fill_mode="constant", fill_value=0.5)])
    model = keras.Sequential([keras.Input((12, 12, 3)), keras.layers.Conv2D(4, 3, activation="relu"),
                              keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(3)])
    optimizer = FusedEmaAdam(1e-2)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        x = augment(x, training=True)
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    rng = np.random.default_rng(22)
    specs = [tf.TensorSpec((4, 12, 12, 3), tf.float32), tf.TensorSpec((4,), tf.int32)]

    def batch(k):
        return [rng.uniform(0, 1, (4, 12, 12, 3)).astype(np.float32), rng.integers(0, 3, 4).astype(np.int32)]

    state = [*model.variables, *optimizer.variables, *augment.variables]
    graph, differences, loss = train_steps.lower_and_compare(step, specs, batch, state, str(tmp_path), steps=3)
    assert loss <= 1e-5 and max(differences.values()) <= 1e-5, (loss, differences)
    assert len(graph.nodes_of_type("ImageProjectiveTransformV2")) == 3
