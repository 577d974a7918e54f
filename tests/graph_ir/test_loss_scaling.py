"""Loss scaling lowered to GE: a mixed_float16 CNN trained with keras.optimizers.LossScaleOptimizer wrapping
FusedEmaAdam or PowerSign, K steps in graph_ir.Session beside K steps of TensorFlow, one of whose batches makes the
scaled gradients overflow float16. Keras's step is an If on IsFinite/All of the gradients (graph_ir/lowering/
control.py): its then-branch unscales the gradients, applies our optimizer and counts toward the next upscale (a nested
If); its else-branch halves the scale and resets the counter. Both write variables inside the branches, which GE
does on the Variables of the same names.

Asserted: the overflowing step is skipped in both (the weights, slots and optimizer's iterations unchanged across it,
the scale halved, the counter reset), the other steps apply; every variable, slot, counter and the loss within 1e-5
of its own scale (FLOAT32_TOLERANCE).

The Conv2D and Dense layers keep their biases: TF's grappler remapper (with oneDNN, its x86 default) fuses each
float16 Conv2D and MatMul with the BiasAdd after it and rounds to float16 once, and so does the lowering (one GE
Conv2D, one MatMulV2 with a bias input; graph_ir/lowering/ops/conv.py and nn.py). Measured (K = 4): every variable,
slot and counter bitwise TF's (0.0), the loss within 1.0e-7; rounding the products first instead (a Conv2D or
MatMulV2, then a BiasAdd) left them 7.5e-4 (PowerSign) and 1.1e-3 (FusedEmaAdam) apart, the loss 5.0e-4.

Where TF's oneDNN does not take float16 (an AMD EPYC, say: graph_ir/executors/onednn.py), TF runs float16 on its
Eigen kernels: the products and the BiasAdds round apart, and so does the lowering, but Eigen's float16 gradient
contractions sum in float16 where graph_ir (as Ascend's kernels) sums in float32. Measured there (K = 4): the
variables and slots within 6.5e-4 (PowerSign) and 1.0e-3 (FusedEmaAdam) of their scale; asserted within 2e-3."""

from __future__ import annotations

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import layers
from tensorflow.python.util import _pywrap_util_port

import graph_ir
from graph_ir.executors.onednn import onednn_runs
from tests.graph_ir.test_lowering_steps import FLOAT32_TOLERANCE, OPTIMIZERS, SPARSE_XENT
from tests.helpers import train_steps
from tests.helpers.lowering import captured, session_values, state_name

STEPS = 4
EIGEN_FLOAT16_TOLERANCE = 2e-3  # TF's Eigen float16 kernels, where oneDNN does not take float16
OVERFLOW = 1  # the step whose scaled gradients overflow float16


def _model() -> keras.Model:
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        return keras.Sequential([keras.Input((8, 8, 3)), layers.Conv2D(4, 3, activation="relu"),
                                 layers.MaxPooling2D(), layers.Conv2D(6, 3), layers.Flatten(), layers.Dense(5)])
    finally:
        keras.mixed_precision.set_global_policy("float32")


def _batches(specs):
    base, seen = train_steps.batches(71, *specs, y_high=5), {}

    def batch(k):
        if k not in seen:
            x, y = base(k)
            seen[k] = (x * np.float32(2000.0) if k == OVERFLOW else x, y)
        return seen[k]

    return batch


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # the overflowing step's float16
@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_mixed_float16_cnn_with_loss_scale_optimizer_skips_the_overflowing_step(optimizer, tmp_path):
    keras.utils.set_random_seed(70)
    model = _model()
    inner = OPTIMIZERS[optimizer]()
    opt = keras.optimizers.LossScaleOptimizer(inner)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = SPARSE_XENT(y, tf.cast(model(x, training=True), tf.float32))
            scaled = opt.scale_loss(loss)
        opt.apply_gradients(zip(tape.gradient(scaled, model.trainable_variables), model.trainable_variables))
        return loss

    specs = [tf.TensorSpec((4, 8, 8, 3), tf.float32), tf.TensorSpec((4,), tf.int32)]
    batch = _batches(specs)
    step(*batch(-1))  # builds the slots and the scale's variables
    graph = graph_ir.from_tensorflow(step, *specs)
    types = {n.type for g in (graph, *graph.subgraphs.values()) for n in g.nodes.values()}
    assert {"If", "IsFinite", "ReduceAll"} <= types, sorted(types)
    assert ("ApplyFusedEmaAdam" if optimizer == "fused_ema_adam" else "InplaceApplyPowerSign") in types
    biased = [n.type for n in graph.nodes.values() if n.type in ("Conv2D", "MatMulV2") and len(n.inputs) == 3]
    fused = _pywrap_util_port.IsMklEnabled() and onednn_runs("float16")
    tolerance = FLOAT32_TOLERANCE if fused else EIGEN_FLOAT16_TOLERANCE
    if fused:  # the forward Conv2Ds and the Dense's MatMul
        # take their BiasAdds in, as TF's oneDNN fuses them
        assert sorted(biased) == ["Conv2D", "Conv2D", "MatMulV2"] and not graph.nodes_of_type("BiasAdd"), biased
    else:  # TF runs float16 on its Eigen kernels here, each op rounding
        assert not biased and len(graph.nodes_of_type("BiasAdd")) == 3, biased
    path = os.path.join(tmp_path, "step.air")
    graph.save(path)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.load(path))
    state = captured(graph, [*model.variables, *opt.variables, *inner.variables])
    weights = list(model.trainable_variables)
    scale, counter = opt.dynamic_scale, opt.step_counter
    assert {v.path for v in state} >= {scale.path, counter.path, inner.iterations.path}
    loss_difference = 0.0
    for k in range(STEPS):
        tf_before = [v.numpy() for v in (*weights, inner.iterations, scale)]
        ge_before = session_values(graph, session, [*weights, inner.iterations, scale])
        got = session.run_graph(0, list(batch(k)))[0]
        want = step(*batch(k)).numpy()
        loss_difference = max(loss_difference, train_steps.scaled_difference(got, want))
        tf_after = [v.numpy() for v in (*weights, inner.iterations, scale)]
        ge_after = session_values(graph, session, [*weights, inner.iterations, scale])
        for before, after in ((tf_before, tf_after), (ge_before, ge_after)):
            unchanged = [np.array_equal(a, b) for a, b in zip(before[:-2], after[:-2])]
            if k == OVERFLOW:  # skipped: weights and the optimizer's iterations stay, the scale halves
                assert all(unchanged) and after[-2] == before[-2] and after[-1] == before[-1] / 2
            else:
                assert not any(unchanged) and after[-2] == before[-2] + 1 and after[-1] == before[-1]
        if k == OVERFLOW:
            assert session_values(graph, session, [counter])[0] == counter.numpy() == 0
    differences = {state_name(graph, v): train_steps.scaled_difference(g, v.numpy())
                   for v, g in zip(state, session_values(graph, session, state))}
    assert max(differences.values()) <= tolerance, sorted(differences.items())
    assert loss_difference <= tolerance
