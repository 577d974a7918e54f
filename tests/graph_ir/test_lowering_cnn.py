"""A CNN's whole training step (Conv2D, BatchNormalization, MaxPooling2D, AveragePooling2D, Flatten, Dense; sparse
cross-entropy) lowered to GE as one graph and run K steps in graph_ir.Session beside K steps in TensorFlow, with
PowerSign and FusedEmaAdam: every weight, slot, counter and the BatchNormalization moving statistics. Measured
(K = 3): every state variable and the loss within 4e-7 scaled (max |got - want| / max |want|) of TF's."""

from __future__ import annotations

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import layers

import graph_ir
from tests.graph_ir.test_lowering_steps import FLOAT32_TOLERANCE, OPTIMIZERS, SPARSE_XENT
from tests.helpers import ROOT, train_steps


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_cnn_step(optimizer, tmp_path):
    keras.utils.set_random_seed(4)
    model, opt = train_steps.cnn(), OPTIMIZERS[optimizer]()
    step = train_steps.train_step(model, SPARSE_XENT, opt)
    specs = [tf.TensorSpec((4, 8, 8, 3), tf.float32), tf.TensorSpec((4,), tf.int32)]
    graph, differences, loss = train_steps.lower_and_compare(
        step, specs, train_steps.batches(5, *specs, y_high=5), [*model.variables, *opt.variables], str(tmp_path))
    types = {n.type for n in graph.nodes.values()}
    assert {"Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "MaxPool", "MaxPoolGrad", "AvgPool",
            "AvgPoolGrad", "RsqrtGrad", "SquaredDifference"} <= types
    moving = [graph.variable_name(v) for v in model.non_trainable_variables]  # BatchNormalization's statistics
    assert len(moving) == 2 and all(name in differences for name in moving)
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert loss <= FLOAT32_TOLERANCE


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_cnn_step_with_the_conv_bias_before_batch_normalization(optimizer, tmp_path):
    """The model as a user writes it: the first Conv2D keeps its bias, right before BatchNormalization, which
    subtracts the batch mean, so that bias cannot change the loss and its gradient is zero in exact arithmetic: TF's
    is rounding noise (about 1e-7 of the kernel's), and so is the session's, another noise. PowerSign's steps are in
    proportion to that noise; Adam's normalization turns it into steps of about lr. So that bias, and the moving mean
    it shifts, are compared against those bounds; the loss and everything else within the float32 tolerance.
    Measured: the rest within 4e-7 scaled; the noisy bias 3e-9 (PowerSign) and 0.018 (FusedEmaAdam, lr 0.01) apart,
    the moving mean 1e-10 and 2.2e-4 apart."""
    keras.utils.set_random_seed(4)
    model = keras.Sequential([keras.Input((8, 8, 3)), layers.Conv2D(4, 3, padding="same"),
                              layers.BatchNormalization(), layers.Activation("relu"), layers.MaxPooling2D(),
                              layers.Conv2D(6, 3), layers.AveragePooling2D(2), layers.Flatten(), layers.Dense(5)])
    opt = OPTIMIZERS[optimizer]()
    specs = [tf.TensorSpec((4, 8, 8, 3), tf.float32), tf.TensorSpec((4,), tf.int32)]
    batch = train_steps.batches(5, *specs, y_high=5)
    x, y = batch(-2)
    with tf.GradientTape() as tape:
        loss = SPARSE_XENT(y, model(x, training=True))
    kernel_grad, bias_grad = tape.gradient(loss, model.layers[0].trainable_variables)
    assert np.max(np.abs(bias_grad)) <= 1e-6 * np.max(np.abs(kernel_grad))  # what TF steps on is noise
    step = train_steps.train_step(model, SPARSE_XENT, opt)
    graph, differences, loss = train_steps.lower_and_compare(step, specs, batch, [*model.variables, *opt.variables],
                                                             str(tmp_path))
    bias, moving_mean = model.layers[0].bias, model.layers[1].moving_mean
    noisy = {graph.variable_name(v): v for v in (bias, moving_mean)}
    assert set(noisy) <= set(differences)
    rest = {name: d for name, d in differences.items() if name not in noisy}
    assert max(rest.values()) <= FLOAT32_TOLERANCE, rest
    assert loss <= FLOAT32_TOLERANCE
    # two runs of K noise-driven steps of at most about lr each (Adam: |m_hat| / sqrt(v_hat) <= ~1 for a few steps)
    bias_bound = 2 * train_steps.K * float(opt.learning_rate) * 1.5
    absolute = {name: differences[name] * float(np.max(np.abs(v.numpy()))) for name, v in noisy.items()}
    assert absolute[graph.variable_name(bias)] <= bias_bound, absolute
    momentum = model.layers[1].momentum  # the moving mean moves by (1 - momentum) of the bias's shift each step
    assert absolute[graph.variable_name(moving_mean)] <= (1 - momentum) * train_steps.K * bias_bound, absolute


def test_the_cnn_example_lowers_and_matches(tmp_path):
    out = tmp_path / "cnn_step.air"
    result = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "lower_cnn_step.py"), "--out", str(out)],
                            check=False, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "largest:" in result.stdout and graph_ir.load(str(out)).nodes_of_type("Conv2DBackpropFilter")
