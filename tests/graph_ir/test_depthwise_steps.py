"""Whole training steps through depthwise convolutions, lowered to GE as one graph and run K steps in
graph_ir.Session beside K steps in TensorFlow, with PowerSign and FusedEmaAdam: a Keras model with DepthwiseConv2D
(channel multipliers 2 and 1, SAME and VALID, strides 1 and 2), one with SeparableConv2D (a depthwise then a 1x1
Conv2D) and keras.applications.MobileNetV2 (ZeroPadding2D, Relu6, BatchNormalization, depthwise and 1x1
convolutions). For the first two every weight, slot and counter, and the loss, within 1e-5 of its own scale
(measured, K = 3: at most 3.0e-7 (DepthwiseConv2D) and 7.6e-7 (SeparableConv2D), losses within 1.5e-7);
MobileNetV2's step is chaotic in float32 (see its tests)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import layers

import graph_ir
from graph_ir.lowering import ops
from tests.graph_ir.test_lowering_steps import FLOAT32_TOLERANCE, OPTIMIZERS, SPARSE_XENT
from tests.helpers import tf_spread, train_steps
from tests.helpers.lowering import captured, session_values

DEPTHWISE_OPS = {"DepthwiseConv2D", "DepthwiseConv2DBackpropFilter", "DepthwiseConv2DBackpropInput"}


def depthwise_model() -> keras.Model:
    return keras.Sequential([keras.Input((9, 8, 3)), layers.DepthwiseConv2D(3, depth_multiplier=2, padding="same"),
                             layers.Activation("relu"), layers.DepthwiseConv2D(3, strides=2, padding="valid"),
                             layers.Flatten(), layers.Dense(5)])


def separable_model() -> keras.Model:
    return keras.Sequential([keras.Input((9, 8, 3)), layers.SeparableConv2D(6, 3, padding="same", depth_multiplier=2),
                             layers.Activation("relu"), layers.SeparableConv2D(4, 3, strides=2),
                             layers.GlobalAveragePooling2D(), layers.Dense(5)])


def _run(model: keras.Model, optimizer: str, shape, classes: int, tmp_path):
    opt = OPTIMIZERS[optimizer]()
    step = train_steps.train_step(model, SPARSE_XENT, opt)
    specs = [tf.TensorSpec(shape, tf.float32), tf.TensorSpec((shape[0],), tf.int32)]
    graph, differences, loss = train_steps.lower_and_compare(
        step, specs, train_steps.batches(5, *specs, y_high=classes), [*model.variables, *opt.variables],
        str(tmp_path))
    assert DEPTHWISE_OPS <= {n.type for n in graph.nodes.values()}
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert loss <= FLOAT32_TOLERANCE
    return graph, differences


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_depthwise_conv2d_step(optimizer, tmp_path):
    keras.utils.set_random_seed(4)
    _run(depthwise_model(), optimizer, (4, 9, 8, 3), 5, tmp_path)


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_separable_conv2d_step(optimizer, tmp_path):
    keras.utils.set_random_seed(4)
    graph, _ = _run(separable_model(), optimizer, (4, 9, 8, 3), 5, tmp_path)
    assert {"Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput"} <= {n.type for n in graph.nodes.values()}


_MISSING = sorted({"Relu6", "Relu6Grad", "Pad"} - set(ops.lowered_types()))
_NEEDS = pytest.mark.xfail(bool(_MISSING), reason=f"MobileNetV2 needs {_MISSING}, which the activation and slicing "
                                                  "families add; not registered yet", strict=True)
MOBILENET_BATCH = 6  # BatchNormalization over 6 samples at the 1x1 top blocks


def mobilenet_v2() -> keras.Model:
    return keras.applications.MobileNetV2(weights=None, input_shape=(32, 32, 3), classes=10,
                                          classifier_activation=None)


@pytest.mark.slow
@_NEEDS
@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_mobilenet_v2_step(optimizer, tmp_path):
    """The whole MobileNetV2 step lowers (ZeroPadding2D, Relu6, the depthwise and 1x1 convolutions and their
    gradients), and K steps run beside TF's with every state finite and each step's loss within the chaotic rule.

    Rule: TF's own spread (tests/helpers/tf_spread.py). At 32x32 the top blocks are 1x1, BatchNormalization
    normalizes over 6 samples and the step is chaotic in float32, so each loss is held to
    max(1e-5, SPREAD_FACTOR x TF's distance from itself on a batch perturbed by rounding), not to a fixed
    tolerance: GE's first loss was 3e-6 from TF's on an Intel Xeon and 1.3e-5 on an AMD EPYC, where TF's own spread
    was 1.2e-5 (first loss), 0.05 and 0.5 (second and third). Not compared element by element after K steps: TF
    itself, given a first batch perturbed by 1e-7 relative, ends K = 3 steps with state variables a median 7%
    (PowerSign) and 0.9% (FusedEmaAdam) of their scale apart (up to 150%). Each node isolated is checked by
    test_compare_applications.py."""
    keras.utils.set_random_seed(4)
    model, opt = mobilenet_v2(), OPTIMIZERS[optimizer]()
    step = train_steps.train_step(model, SPARSE_XENT, opt)
    specs = [tf.TensorSpec((MOBILENET_BATCH, 32, 32, 3), tf.float32), tf.TensorSpec((MOBILENET_BATCH,), tf.int32)]
    batch = train_steps.batches(5, *specs, y_high=10)
    step(*batch(-1))  # builds the optimizer's variables
    graph = graph_ir.from_tensorflow(step, *specs)
    assert DEPTHWISE_OPS | {"Relu6", "Relu6Grad", "Pad"} <= {n.type for n in graph.nodes.values()}
    path = str(tmp_path / "mobilenet_v2.air")
    graph.save(path)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.load(path))
    start = tf_spread.Snapshot([*model.variables, *opt.variables])
    inputs = [batch(k) for k in range(train_steps.K)]
    got = [session.run_graph(0, list(args))[0] for args in inputs]
    want = [step(*args).numpy() for args in inputs]
    losses = {k: train_steps.scaled_difference(got[k], want[k]) for k in range(train_steps.K)}
    runs = []
    for run in range(tf_spread.RUNS):
        start.restore(perturb_seed=100 * run)
        again = [step(*tf_spread.perturbed(args, seed=100 * run + k + 1)).numpy() for k, args in enumerate(inputs)]
        runs.append({k: train_steps.scaled_difference(again[k], want[k]) for k in range(train_steps.K)})
    spread = tf_spread.largest(runs)
    assert not tf_spread.beyond(losses, FLOAT32_TOLERANCE, spread), (losses, spread)
    held = captured(graph, [*model.variables, *opt.variables])
    assert len(held) >= len(model.trainable_variables)
    assert all(np.isfinite(v).all() for v in session_values(graph, session, held))


@pytest.mark.slow
@_NEEDS
def test_mobilenet_v2_activations_are_as_close_to_float64_as_tensorflows():
    """Every layer's output of MobileNetV2 in training mode (one call, batch statistics), in the session and in TF's
    float32, against the same model in float64: the session's within 5x TF's distance (+1e-6 of scale). Measured: a
    median 1.9x, at most 3.9x (block_14_depthwise_relu, 9.6e-5 against 2.5e-5).

    Why activations and not gradients: the gradients below block 11 hinge on coin flips. block_11_depthwise_BN's
    output at one element is -4.1e-7 in float64, -3.6e-6 in TF and +6.7e-7 in the session (both within rounding of
    0, TF the farther), so Relu6's gradient passes there in the session only, and blocks 0-11's gradients end up
    0.02-0.16 of their scale from TF's and from float64's, where TF's happen to be 2e-3 from float64 (measured)."""
    keras.utils.set_random_seed(4)
    model = mobilenet_v2()
    exact = _float64_copy(mobilenet_v2, model)
    layers_out = [layer for layer in model.layers[1:] if "pooling" not in layer.name]
    names = [layer.name for layer in layers_out]
    narrow = keras.Model(model.input, [layer.output for layer in layers_out])
    wide = keras.Model(exact.input, [exact.get_layer(name).output for name in names])
    x = np.random.default_rng(5).standard_normal((MOBILENET_BATCH, 32, 32, 3)).astype(np.float32)
    forward = tf.function(lambda x: narrow(x, training=True))
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.from_tensorflow(forward, tf.TensorSpec(x.shape, tf.float32)))
    got, want = session.run_graph(0, [x]), [t.numpy() for t in forward(x)]
    truth = [t.numpy() for t in wide(x.astype(np.float64), training=True)]
    worse = {}
    for name, ours, theirs, exact_value in zip(names, got, want, truth):
        d_ours = train_steps.scaled_difference(ours, exact_value)
        d_tf = train_steps.scaled_difference(theirs, exact_value)
        if d_ours > 5 * d_tf + 1e-6:
            worse[name] = (d_ours, d_tf)
    assert not worse, worse


def _float64_copy(build, model: keras.Model) -> keras.Model:
    """build()'s model in float64 with model's weights."""
    policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float64")
    try:
        exact = build()
    finally:
        keras.config.set_dtype_policy(policy)
    for wide, narrow in zip(exact.variables, model.variables):
        wide.assign(tf.cast(narrow, tf.float64))
    return exact


def test_blocks_13_and_14_of_mobilenet_v2_replica_gradients_are_as_close_to_float64_as_tensorflows():
    """MobileNetV2's blocks 13 and 14 as a small model (ZeroPadding2D, strided VALID DepthwiseConv2D on 2x2, SAME
    DepthwiseConv2D on 1x1, Relu6, 1x1 convolutions, BatchNormalization over 6 samples, the residual add), from
    inputs of their shape: every gradient within 3x TF's float32 distance of the float64 one (+1e-6)."""
    def replica() -> keras.Model:
        inputs = keras.Input((2, 2, 48))
        x = layers.DepthwiseConv2D(3, strides=2, use_bias=False)(layers.ZeroPadding2D(((0, 1), (0, 1)))(inputs))
        x = layers.ReLU(6.0)(layers.BatchNormalization()(x))
        shortcut = layers.BatchNormalization()(layers.Conv2D(32, 1, use_bias=False)(x))
        x = layers.ReLU(6.0)(layers.BatchNormalization()(layers.Conv2D(96, 1, use_bias=False)(shortcut)))
        x = layers.ReLU(6.0)(layers.BatchNormalization()(layers.DepthwiseConv2D(3, padding="same",
                                                                                use_bias=False)(x)))
        x = layers.BatchNormalization()(layers.Conv2D(32, 1, use_bias=False)(x))
        x = layers.Add()([x, shortcut])
        return keras.Model(inputs, layers.Dense(10)(layers.GlobalAveragePooling2D()(x)))

    keras.utils.set_random_seed(4)
    ours, tfs = _distances_from_float64(replica, (MOBILENET_BATCH, 2, 2, 48))
    worse = {k: (ours[k], tfs[k]) for k in ours if ours[k] > 3 * tfs[k] + 1e-6}
    assert not worse, worse


def _distances_from_float64(build, shape) -> tuple[dict, dict]:
    """{name: scaled distance from the float64 gradient} for the session's and TF's float32 loss and gradients of
    build()'s model on one random batch, leaving out the gradients that are zero in exact arithmetic."""
    model = build()
    exact = _float64_copy(build, model)
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.integers(0, 10, shape[:1]).astype(np.int32)

    def loss_and_grads(m, x):
        with tf.GradientTape() as tape:
            loss = SPARSE_XENT(y, m(x, training=True))
        return [loss, *tape.gradient(loss, m.trainable_variables)]

    step = tf.function(lambda x: loss_and_grads(model, x))
    graph = graph_ir.from_tensorflow(step, tf.TensorSpec(shape, tf.float32))
    session = graph_ir.Session()
    session.add_graph(0, graph)
    got, want = session.run_graph(0, [x]), [t.numpy() for t in step(x)]
    truth = [t.numpy() for t in loss_and_grads(exact, x.astype(np.float64))]
    names = ["loss", *(v.path for v in model.trainable_variables)]
    scale = max(float(np.max(np.abs(t))) for t in truth[1:])
    kept = [k for k, t in enumerate(truth) if k == 0 or float(np.max(np.abs(t))) > 1e-9 * scale]
    return ({names[k]: train_steps.scaled_difference(got[k], truth[k]) for k in kept},
            {names[k]: train_steps.scaled_difference(want[k], truth[k]) for k in kept})
