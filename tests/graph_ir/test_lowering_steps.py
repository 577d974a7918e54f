"""Whole training steps (forward pass, loss, gradients, optimizer) lowered to GE as one graph and run K steps in
graph_ir.Session beside K steps in TensorFlow: an MLP classifier and an attention block with an Embedding, each with
PowerSign and FusedEmaAdam, in float32 and with mixed_bfloat16; Keras's own train_step; a TF1 graph with fetches.
(The CNN family: tests/graph_ir/test_lowering_cnn.py.)

Tolerances (docs/lowering.md, "Tolerances and the lowering table"): every variable within 1e-5 of its own scale after K
steps in float32 (matmul, reductions, exp/tanh/erf are not bitwise Eigen's), 2e-2 with mixed_bfloat16."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from tests.helpers import train_steps
from tf_plugin.optimizers import FusedEmaAdam, PowerSign

OPTIMIZERS = {"powersign": lambda: PowerSign(0.01), "fused_ema_adam": lambda: FusedEmaAdam(0.01, weight_decay=0.01)}
FLOAT32_TOLERANCE = 1e-5
SPARSE_XENT = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_mlp_classifier_step(optimizer, tmp_path):
    keras.utils.set_random_seed(1)
    model, opt = train_steps.mlp(), OPTIMIZERS[optimizer]()
    opt.build(model.trainable_variables)  # its slots and counters exist now: all of them are compared
    step = train_steps.train_step(model, SPARSE_XENT, opt)
    specs = [tf.TensorSpec((6, 12), tf.float32), tf.TensorSpec((6,), tf.int32)]
    graph, differences, loss = train_steps.lower_and_compare(
        step, specs, train_steps.batches(2, *specs, y_high=5), [*model.variables, *opt.variables],
        str(tmp_path))
    types = {n.type for n in graph.nodes.values()}
    assert {"MatMulV2", "BiasAdd", "BiasAddGrad", "ReluGrad", "TanhGrad", "SigmoidGrad",
            "SparseSoftmaxCrossEntropyWithLogits"} <= types
    assert ("ApplyFusedEmaAdam" if optimizer == "fused_ema_adam" else "InplaceApplyPowerSign") in types
    assert len(differences) == len(model.variables) + len(opt.variables) - len(graph.frozen_variables)
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert loss <= FLOAT32_TOLERANCE


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_attention_block_step(optimizer, tmp_path):
    keras.utils.set_random_seed(2)
    model, opt = train_steps.attention(), OPTIMIZERS[optimizer]()
    opt.build(model.trainable_variables)
    step = train_steps.train_step(model, keras.losses.MeanSquaredError(), opt)
    specs = [tf.TensorSpec((4, 6), tf.int32), tf.TensorSpec((4, 3), tf.float32)]
    graph, differences, loss = train_steps.lower_and_compare(
        step, specs, train_steps.batches(3, *specs, x_high=20), [*model.variables, *opt.variables],
        str(tmp_path))
    types = {n.type for n in graph.nodes.values()}
    assert {"GatherV2", "UnsortedSegmentSum", "Einsum", "BatchMatMulV2", "SoftmaxV2", "Erfc", "RsqrtGrad"} <= types
    assert len(differences) == len(model.variables) + len(opt.variables) - len(graph.frozen_variables)
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert loss <= FLOAT32_TOLERANCE


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_mixed_bfloat16_mlp_step(optimizer, tmp_path):
    keras.utils.set_random_seed(3)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        # tanh: bfloat16 Tanh and TanhGrad; relu lowers too (GE's Relu declares no bfloat16, so it runs in float32
        # between Casts, bitwise TF's): the mixed_bfloat16 CNN step in tests/graph_ir/test_lowering_cnn.py
        model = train_steps.mlp(activation="tanh")
    finally:
        keras.mixed_precision.set_global_policy("float32")
    opt = OPTIMIZERS[optimizer]()
    opt.build(model.trainable_variables)
    step = train_steps.train_step(model, SPARSE_XENT, opt)
    specs = [tf.TensorSpec((6, 12), tf.float32), tf.TensorSpec((6,), tf.int32)]
    graph, differences, loss = train_steps.lower_and_compare(
        step, specs, train_steps.batches(4, *specs, y_high=5), [*model.variables, *opt.variables],
        str(tmp_path))
    assert any(n.type == "MatMulV2" and n.output_descs[0].dtype.name == "bfloat16" for n in graph.nodes.values())
    assert len(differences) == len(model.variables) + len(opt.variables) - len(graph.frozen_variables)
    assert max(differences.values()) <= 2e-2, differences
    assert loss <= 2e-2


def test_elu_in_bfloat16_is_refused_naming_the_node():  # GE's Elu declares no bfloat16 (Relu runs in float32)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = train_steps.mlp(activation="elu")
    finally:
        keras.mixed_precision.set_global_policy("float32")
    step = train_steps.train_step(model, SPARSE_XENT, PowerSign(0.01))
    specs = [tf.TensorSpec((6, 12), tf.float32), tf.TensorSpec((6,), tf.int32)]
    with pytest.raises(graph_ir.LoweringError, match=r"TF Elu '.*dense.*Elu'.*bfloat16"):
        graph_ir.from_tensorflow(step, *specs)


def test_keras_train_step_lowers_with_its_metrics(tmp_path):
    keras.utils.set_random_seed(5)
    model = train_steps.mlp()
    model.compile(optimizer=FusedEmaAdam(0.01), loss=SPARSE_XENT)
    model.optimizer.build(model.trainable_variables)  # its slots and counters exist now: all of them are compared
    specs = [tf.TensorSpec((6, 12), tf.float32), tf.TensorSpec((6,), tf.int32)]
    step = tf.function(lambda x, y: model.train_step((x, y)))
    graph, differences, outputs = train_steps.lower_and_compare(
        step, specs, train_steps.batches(6, *specs, y_high=5),
        [*model.variables, *model.optimizer.variables, *model.metrics_variables], str(tmp_path))
    assert len(differences) == len(model.variables) + len(model.optimizer.variables) + len(
        model.metrics_variables) - len(graph.frozen_variables)
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert outputs <= FLOAT32_TOLERANCE  # the returned loss metric


@pytest.mark.parametrize("model_fn, message", [
    (lambda: keras.Sequential([keras.Input((12,)), keras.layers.Lambda(lambda t: t + tf.random.normal((12,))),
                               keras.layers.Dense(5)]), r"RandomStandardNormal \(node '.*'\): it has no seed"),
])
def test_what_cannot_be_lowered_is_refused_naming_the_node(model_fn, message):
    tf.random.set_seed(None)  # an unseeded draw: TF's own numbers cannot be drawn (seeded ones lower)
    model = model_fn()
    step = train_steps.train_step(model, SPARSE_XENT, PowerSign(0.01))
    specs = [tf.TensorSpec((6, 12), tf.float32), tf.TensorSpec((6,), tf.int32)]
    with pytest.raises(graph_ir.LoweringError, match=message):
        graph_ir.from_tensorflow(step, *specs)


def test_tf1_dataflow_control_flow_is_refused():  # TF2's tf.cond lowers (tests/graph_ir/test_lowering_control.py)
    v = tf.Variable(np.ones(3, np.float32))

    @tf.function
    def step(x):
        low, high = tf.raw_ops.Switch(data=x, pred=tf.reduce_sum(x) > 0, name="switch")
        v.assign(tf.raw_ops.Merge(inputs=[low, high * 2])[0])
        return v.read_value()

    with pytest.raises(graph_ir.LoweringError, match=r"Switch \(node 'switch'\): TF1's dataflow control flow"):
        graph_ir.from_tensorflow(step, tf.TensorSpec((3,), tf.float32))


@pytest.mark.parametrize("optimizer", ["PowerSignOptimizer", "FusedEmaAdamOptimizer"])
def test_tf1_graph_training_step_with_fetches(optimizer):
    from tf_plugin.compat import v1

    rng = np.random.default_rng(7)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (6, 12), name="x")
        y = tf.compat.v1.placeholder(tf.int32, (6,), name="y")
        w1 = tf.Variable(rng.standard_normal((12, 16)).astype(np.float32) * 0.3, name="w1")
        b1 = tf.Variable(np.zeros(16, np.float32), name="b1")
        w2 = tf.Variable(rng.standard_normal((16, 5)).astype(np.float32) * 0.3, name="w2")
        logits = tf.matmul(tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), b1)), w2)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        step = tf.Variable(0, dtype=tf.int64, name="global_step")
        train_op = getattr(v1, optimizer)(0.01).minimize(loss, global_step=step)
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(init)
        lowered = graph_ir.from_tensorflow(graph, fetches=[train_op, loss], session=sess)
        session = graph_ir.Session()
        session.add_graph(0, lowered)
        batch = train_steps.batches(8, tf.TensorSpec((6, 12), tf.float32), tf.TensorSpec((6,), tf.int32), y_high=5)
        for k in range(train_steps.K):
            xs, ys = batch(k)
            (got_loss,) = session.run_graph(0, [xs, ys])
            _, want_loss = sess.run([train_op, loss], {x: xs, y: ys})
            assert train_steps.scaled_difference(got_loss, want_loss) <= FLOAT32_TOLERANCE
        for v in (w1, b1, w2, step):
            (got,) = session.get_variables([lowered.variable_name(v)])
            assert train_steps.scaled_difference(got, sess.run(v)) <= FLOAT32_TOLERANCE, v.name


def test_data_dependent_shapes_other_than_where_are_refused():
    """tf.where and tf.boolean_mask lower (tests/graph_ir/test_sparse_updates.py); tf.unique's sizes do not."""
    v = tf.Variable(np.ones(4, np.float32))

    @tf.function
    def step(x):
        v.assign_add(tf.reduce_sum(tf.unique(x)[0]) * tf.ones(4))

    with pytest.raises(graph_ir.LoweringError, match=r"TF op Unique .*depends on the data"):
        graph_ir.from_tensorflow(step, tf.TensorSpec((5,), tf.float32))
