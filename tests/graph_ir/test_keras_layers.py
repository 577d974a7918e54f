"""Every built-in Keras layer that can sit in a training step, on the GE path: for each, a tiny model using it (the
layer, then Flatten and Dense(3) unless stated; merging layers take two Dense branches; attention layers take the
sequence as query and value), its whole training step (sparse cross-entropy, FusedEmaAdam) lowered with
graph_ir.from_tensorflow and run K = 2 steps in graph_ir.Session beside K = 2 steps in TensorFlow on the same
batches: every weight, slot and counter within 1e-5 of its own scale (max |GE - TF| / max |TF|) unless the case
states another tolerance; or the LoweringError the lowering gives for it, with the reason. A test enumerates
keras.layers and checks that every layer class is a case here or left out with a reason (LEFT_OUT)."""

from __future__ import annotations

import inspect

import keras
import pytest
import tensorflow as tf
from keras import layers

import graph_ir
from tests.helpers import train_steps
from tests.helpers.keras_layers import (
    AUGMENTATION_REFUSALS,
    AUGMENTATIONS,
    BATCH,
    CASES,
    CLASSES,
    INPUTS,
    LEFT_OUT,
    SPARSE_XENT,
    Case,
    K,
)
from tf_plugin.optimizers import FusedEmaAdam

# Flatten after Masking drops the mask (the step still trains Masking's zeroing through Flatten and Dense)
pytestmark = pytest.mark.filterwarnings("ignore:Layer 'flatten.*does not support masking")

def _layer_classes() -> set[str]:
    """Every layer class keras.layers exports, by its own class name (aliases such as Conv2D/Convolution2D and
    MaxPool2D/MaxPooling2D are one class)."""
    return {cls.__name__ for name in dir(layers)
            if inspect.isclass(cls := getattr(layers, name)) and issubclass(cls, keras.layers.Layer)}


def test_the_cases_cover_every_keras_layer():
    covered = set(CASES) | set(AUGMENTATIONS) | set(LEFT_OUT)
    classes = _layer_classes()
    assert classes <= covered, sorted(classes - covered)
    assert covered <= classes, sorted(covered - classes)
    assert not set(CASES) & set(LEFT_OUT) and not set(AUGMENTATIONS) & (set(CASES) | set(LEFT_OUT))


def _model(case: Case) -> keras.Model:
    shape, dtype, _ = INPUTS[case.input]
    x = keras.Input(shape, dtype=dtype.name)
    if case.shape in ("merge", "model"):
        y = case.layer(x)
    else:
        y = case.layer()(x)
    y = layers.Flatten()(y)
    return keras.Model(x, layers.Dense(CLASSES)(y))


def _step(model: keras.Model, kind: str):
    optimizer = FusedEmaAdam(0.01, weight_decay=0.01)
    step = train_steps.train_step(model, SPARSE_XENT, optimizer)
    shape, dtype, high = INPUTS[kind]
    specs = [tf.TensorSpec((BATCH, *shape), dtype), tf.TensorSpec((BATCH,), tf.int32)]
    return step, optimizer, specs, train_steps.batches(11, *specs, x_high=high, y_high=CLASSES)


def _check(case: Case, tmp_path) -> None:
    keras.utils.set_random_seed(5)
    model = _model(case)
    step, optimizer, specs, batch = _step(model, case.input)
    if case.refusal is not None:
        step(*batch(-1))
        with pytest.raises(graph_ir.LoweringError, match=case.refusal):
            graph_ir.from_tensorflow(step, *specs)
        return
    _, differences, loss = train_steps.lower_and_compare(step, specs, batch, [*model.variables, *optimizer.variables],
                                                         str(tmp_path), steps=K)
    assert differences and max(differences.values()) <= case.tolerance, differences
    assert loss <= case.tolerance


@pytest.mark.parametrize("name", list(CASES))
def test_layer_step(name, tmp_path):
    _check(CASES[name], tmp_path)


SLOW = {"RandAugment"}  # traces every augmentation it picks from: over 10 s


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else []) for n in AUGMENTATIONS])
def test_augmentation_step(name, tmp_path):
    refusal, reason = AUGMENTATION_REFUSALS.get(name, (None, ""))
    _check(Case(AUGMENTATIONS[name], "image", refusal=refusal, reason=reason), tmp_path)
