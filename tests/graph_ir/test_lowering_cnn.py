"""A CNN's whole training step (Conv2D, BatchNormalization, MaxPooling2D, AveragePooling2D, Flatten, Dense; sparse
cross-entropy) lowered to GE as one graph and run K steps in graph_ir.Session beside K steps in TensorFlow, with
PowerSign and FusedEmaAdam: every weight, slot, counter and the BatchNormalization moving statistics."""

from __future__ import annotations

import os
import subprocess
import sys

import keras
import pytest
import tensorflow as tf

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


def test_the_cnn_example_lowers_and_matches(tmp_path):
    out = tmp_path / "cnn_step.air"
    result = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "lower_cnn_step.py"), "--out", str(out)],
                            check=False, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "largest:" in result.stdout and graph_ir.load(str(out)).nodes_of_type("Conv2DBackpropFilter")
