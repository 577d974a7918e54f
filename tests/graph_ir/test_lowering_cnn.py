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
from graph_ir.executors.onednn import onednn_runs
from tests.graph_ir.test_lowering_steps import FLOAT32_TOLERANCE, OPTIMIZERS, SPARSE_XENT
from tests.helpers import ROOT, train_steps


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_cnn_step(optimizer, tmp_path):
    keras.utils.set_random_seed(4)
    model, opt = train_steps.cnn(), OPTIMIZERS[optimizer]()
    opt.build(model.trainable_variables)  # its slots and counters exist now: all of them are compared
    step = train_steps.train_step(model, SPARSE_XENT, opt)
    specs = [tf.TensorSpec((4, 8, 8, 3), tf.float32), tf.TensorSpec((4,), tf.int32)]
    graph, differences, loss = train_steps.lower_and_compare(
        step, specs, train_steps.batches(5, *specs, y_high=5), [*model.variables, *opt.variables], str(tmp_path))
    types = {n.type for n in graph.nodes.values()}
    assert {"Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "MaxPool", "MaxPoolGrad", "AvgPool",
            "AvgPoolGrad", "RsqrtGrad", "SquaredDifference"} <= types
    moving = [graph.variable_name(v) for v in model.non_trainable_variables]  # BatchNormalization's statistics
    assert len(moving) == 2 and all(name in differences for name in moving)
    assert len(differences) == len(model.variables) + len(opt.variables) - len(graph.frozen_variables)
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
    opt.build(model.trainable_variables)  # its slots and counters exist now: all of them are compared
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


def _mixed_bfloat16_cnn() -> keras.Model:
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        return keras.Sequential([keras.Input((8, 8, 3)), layers.Conv2D(8, 3, padding="same", activation="relu"),
                                 layers.MaxPooling2D(), layers.Conv2D(6, 3, activation="relu"), layers.Flatten(),
                                 layers.Dense(5)])
    finally:
        keras.mixed_precision.set_global_policy("float32")


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_mixed_bfloat16_cnn_step(optimizer, tmp_path):
    """Conv2D with bias, relu, MaxPooling2D, Dense under mixed_bfloat16, K steps beside TF (oneDNN on, its default),
    every weight, slot and counter within 2e-2 (docs/lowering.md's mixed_bfloat16 tolerance). TF fuses each bfloat16
    Conv2D with its BiasAdd and rounds once; so does the lowering (one GE Conv2D with a float32 bias input).
    Measured (K = 3): 4.9e-3 (PowerSign) and 7.0e-3 (FusedEmaAdam) at most, the loss 2.3e-4 and 1.4e-3; rounding
    twice (a Conv2D then a BiasAdd) drifts to 2.6e-2 and 1.1e-2, the loss 1.8e-3 and 1.7e-3."""
    from tensorflow.python.util import _pywrap_util_port

    if not _pywrap_util_port.IsMklEnabled():
        pytest.skip("TF runs without oneDNN (TF_ENABLE_ONEDNN_OPTS=0): it rounds the Conv2D and the BiasAdd apart")
    keras.utils.set_random_seed(3)
    model, opt = _mixed_bfloat16_cnn(), OPTIMIZERS[optimizer]()
    opt.build(model.trainable_variables)  # its slots and counters exist now: all of them are compared
    step = train_steps.train_step(model, SPARSE_XENT, opt)
    specs = [tf.TensorSpec((4, 8, 8, 3), tf.float32), tf.TensorSpec((4,), tf.int32)]
    graph, differences, loss = train_steps.lower_and_compare(
        step, specs, train_steps.batches(5, *specs, y_high=5), [*model.variables, *opt.variables], str(tmp_path))
    convs = graph.nodes_of_type("Conv2D")
    assert len(convs) == 2 and all(len(n.inputs) == 3 and n.inputs[2].dtype.name == "float32" for n in convs)
    assert len(graph.nodes_of_type("BiasAdd")) == 1  # the Dense's
    assert len(differences) == len(model.variables) + len(opt.variables) - len(graph.frozen_variables)
    assert max(differences.values()) <= 2e-2, differences
    assert loss <= 2e-2


def test_a_bfloat16_conv2d_with_another_reader_keeps_its_bias_add_apart():
    """Fusing would change what the other reader sees: the Conv2D and the BiasAdd stay two GE nodes."""
    x_spec, f_spec, b_spec = (tf.TensorSpec(s, tf.bfloat16) for s in ((2, 5, 5, 3), (3, 3, 3, 4), (4,)))

    @tf.function
    def fn(x, f, b):
        y = tf.nn.conv2d(x, f, 1, "SAME")
        return tf.nn.bias_add(y, b), y * 2

    graph = graph_ir.from_tensorflow(fn, x_spec, f_spec, b_spec)
    assert [len(n.inputs) for n in graph.nodes_of_type("Conv2D")] == [2] and graph.nodes_of_type("BiasAdd")
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s.shape).astype(tf.bfloat16.as_numpy_dtype) for s in (x_spec, f_spec, b_spec)]
    session = graph_ir.Session()
    session.add_graph(0, graph)
    for got, want in zip(session.run_graph(0, args), fn(*args)):
        assert train_steps.scaled_difference(got, want.numpy()) <= 2e-2


@pytest.mark.parametrize("seed", range(3))
def test_a_fused_bfloat16_conv2d_and_bias_add_round_once_as_tensorflow(seed):
    """Conv2D + BiasAdd + Relu in bfloat16 against TF (oneDNN fuses them): measured bitwise on every element (a
    bfloat16 product is exact in float32; only the summation order could differ), asserted 99% bitwise and every
    element within one bfloat16 ulp. Rounding the conv first left 12-14% of the elements 1 to 128 ulps apart."""
    from tensorflow.python.util import _pywrap_util_port

    if not _pywrap_util_port.IsMklEnabled():
        pytest.skip("TF runs without oneDNN (TF_ENABLE_ONEDNN_OPTS=0): it rounds the Conv2D and the BiasAdd apart")
    rng = np.random.default_rng(seed)
    bf16 = tf.bfloat16.as_numpy_dtype
    args = [rng.standard_normal(shape).astype(bf16) for shape in ((4, 9, 8, 16), (3, 3, 16, 8), (8,))]
    fn = tf.function(lambda x, f, b: tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, f, 1, "SAME"), b)))
    graph = graph_ir.from_tensorflow(fn, *(tf.TensorSpec(a.shape, tf.bfloat16) for a in args))
    assert [len(n.inputs) for n in graph.nodes_of_type("Conv2D")] == [3] and not graph.nodes_of_type("BiasAdd")
    session = graph_ir.Session()
    session.add_graph(0, graph)
    (got,) = session.run_graph(0, args)
    got, want = got.astype(np.float32), fn(*args).numpy().astype(np.float32)
    assert np.mean(got == want) >= 0.99
    assert np.all(np.abs(got - want) <= np.abs(want) * 2.0**-7)


def _float16_contraction(kind: str, transpose_a: bool, transpose_b: bool):
    if kind == "conv":
        return lambda x, w: tf.nn.conv2d(x, w, 1, "SAME"), ((4, 9, 8, 16), (3, 3, 16, 8))
    a, b = (40, 33) if transpose_a else (33, 40), (24, 40) if transpose_b else (40, 24)
    return lambda x, w: tf.matmul(x, w, transpose_a=transpose_a, transpose_b=transpose_b), (a, b)


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("kind, transpose_a, transpose_b, relu", [
    ("conv", False, False, False), ("conv", False, False, True), ("matmul", False, False, False),
    ("matmul", False, False, True), ("matmul", True, False, True), ("matmul", False, True, False)])
def test_a_fused_float16_contraction_and_bias_add_round_once_as_tensorflow(kind, transpose_a, transpose_b, relu,
                                                                            seed):
    """Conv2D or MatMul (transposed or not) + BiasAdd (+ Relu) in float16 against TF's tf.function (oneDNN fuses
    them, the bias added to the float32 sum, rounded once): one GE Conv2D / MatMulV2 with a bias input. Measured
    99.75-100% bitwise (a float16 product is exact in float32; only the summation order differs), asserted 99% and
    every element within one float16 ulp. Rounding the product first left 11-32% of the elements apart. Where TF's
    oneDNN does not take float16 (an AMD EPYC, or TF_ENABLE_ONEDNN_OPTS=0, as .ci/run runs this test too), its Eigen
    kernels round the product and the BiasAdd apart, and so does graph_ir."""
    contraction, shapes = _float16_contraction(kind, transpose_a, transpose_b)
    rng = np.random.default_rng(seed)
    x, w = (rng.standard_normal(s).astype(np.float16) for s in shapes)
    x.reshape(-1)[:7] = 0  # zeros among the inputs
    b = rng.standard_normal(8 if kind == "conv" else 24).astype(np.float16)
    b[0] = 0

    def fused(x, w, b):
        y = tf.nn.bias_add(contraction(x, w), b)
        return tf.nn.relu(y) if relu else y

    fn = tf.function(fused)
    graph = graph_ir.from_tensorflow(fn, *(tf.TensorSpec(a.shape, tf.float16) for a in (x, w, b)))
    ge_type = "Conv2D" if kind == "conv" else "MatMulV2"
    if onednn_runs("float16"):
        assert [len(n.inputs) for n in graph.nodes_of_type(ge_type)] == [3] and not graph.nodes_of_type("BiasAdd")
    else:  # TF's Eigen kernels run float16 here, the product and the BiasAdd apart: so do graph_ir's
        assert [len(n.inputs) for n in graph.nodes_of_type(ge_type)] == [2] and graph.nodes_of_type("BiasAdd")
    session = graph_ir.Session()
    session.add_graph(0, graph)
    (got,) = session.run_graph(0, [x, w, b])
    got, want = got.astype(np.float32), fn(x, w, b).numpy().astype(np.float32)
    assert np.mean(got == want) >= 0.99
    assert np.all(np.abs(got - want) <= np.maximum(np.abs(want) * 2.0**-10, 2.0**-24))


def test_a_float16_matmul_with_another_reader_keeps_its_bias_add_apart():
    """Fusing would change what the other reader sees: the MatMul and the BiasAdd stay two GE nodes."""
    specs = [tf.TensorSpec(s, tf.float16) for s in ((3, 5), (5, 4), (4,))]

    @tf.function
    def fn(x, w, b):
        y = tf.matmul(x, w)
        return tf.nn.bias_add(y, b), y * 2

    graph = graph_ir.from_tensorflow(fn, *specs)
    assert [len(n.inputs) for n in graph.nodes_of_type("MatMulV2")] == [2] and graph.nodes_of_type("BiasAdd")
