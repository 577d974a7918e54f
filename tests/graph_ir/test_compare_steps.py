"""graph_ir.compare on real steps: clean steps are within tolerance at every node; a defect injected into one node's
executor (a relative bias of 1e-3 on one Conv2D output, a softmax over the wrong axis) is named as the first
departure and as out of tolerance isolated."""

from __future__ import annotations

import keras
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from keras import layers

import tf_plugin
from graph_ir.compare import compare_step, tolerances
from graph_ir.executors import EXECUTORS
from graph_ir.lowering.entry import from_tensorflow
from tests.helpers.train_steps import attention, batches, mlp, train_step
from tests.packaging.test_lowering_table import _TOLERANCES, _table


def residual_cnn() -> keras.Model:
    """ResNet's block: Conv2D, BatchNormalization, relu, Conv2D, the residual Add, relu; then global pooling."""
    inputs = keras.Input((8, 8, 3))
    x = layers.Activation("relu")(layers.BatchNormalization()(layers.Conv2D(4, 3, padding="same",
                                                                             use_bias=False)(inputs)))
    y = layers.Conv2D(4, 3, padding="same")(x)
    x = layers.Activation("relu")(layers.Add()([x, y]))
    return keras.Model(inputs, layers.Dense(5)(layers.GlobalAveragePooling2D()(x)))


def _cnn_case(seed: int):
    keras.utils.set_random_seed(seed)
    step = train_step(residual_cnn(), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      tf_plugin.optimizers.FusedEmaAdam(1e-2))
    batch = batches(seed, tf.TensorSpec((3, 8, 8, 3)), tf.TensorSpec((3,), tf.int32), y_high=5)
    step(*batch(0))  # builds the optimizer's state
    return step, batch(1)


def _attention_case(seed: int):
    keras.utils.set_random_seed(seed)
    step = train_step(attention(), keras.losses.MeanSquaredError(), keras.optimizers.Adam(1e-2))
    batch = batches(seed, tf.TensorSpec((4, 6), tf.int32), tf.TensorSpec((4, 3)), x_high=20)
    step(*batch(0))
    return step, batch(1)


def _first_of_type(step, batch, ge_type: str) -> str:
    graph = from_tensorflow(step, *(tf.TensorSpec(a.shape, tf.dtypes.as_dtype(a.dtype)) for a in batch))
    return next(n.name for n in graph.topological_order() if n.type == ge_type)


@pytest.mark.parametrize("case", [_cnn_case, _attention_case])
def test_a_clean_step_is_within_tolerance_at_every_node(case):
    step, batch = case(3)
    held = step.get_concrete_function(*batch).graph.variables
    before = [v.numpy().copy() for v in held]
    comparison = compare_step(step, *batch)
    after = [v.numpy().copy() for v in held]
    assert held and any(not np.array_equal(a, b) for a, b in zip(after, before, strict=True))  # TF ran the whole step
    assert comparison.first_defect is None, comparison.summary()
    assert all(r.within_isolated is not False for r in comparison.rows)
    # Out of tolerance accumulated only where a node amplifies earlier rounding (Adam's m / sqrt(v)), never
    # before the optimizer: the forward pass and the gradients are within.
    departed = [r for r in comparison.rows if not r.within]
    assert all(r.verdict in ("amplifies", "departs") for r in departed)
    assert all(not r.ge_node.startswith(("functional", "gradient_tape")) for r in departed), departed[:2]
    kinds = {r.ge_type for r in comparison.rows}
    assert {"Variable", "Identity"} <= kinds  # variables after the step, and what the step read
    assert any(r.tf_node.startswith("gradient_tape/") for r in comparison.rows)  # the gradients are rows too
    assert sum(r.isolated is not None for r in comparison.rows) > 20
    written = [r for r in comparison.rows if r.ge_type == "Variable" and r.metrics.max_abs == 0]
    assert written, "some variables are bitwise TF's after the step"
    assert "first defect: none" in comparison.summary()


def _biased(executor, target: str, factor: float):
    def run(node, inputs):
        results = executor(node, inputs)
        if node.name == target:
            results = [(r * np.float32(factor)).astype(r.dtype) for r in results]
        return results
    return run


def test_a_conv2d_output_biased_by_1e_3_is_the_first_departure(monkeypatch):
    step, batch = _cnn_case(5)
    target = _first_of_type(step, batch, "Conv2D")
    monkeypatch.setitem(EXECUTORS, "Conv2D", _biased(EXECUTORS["Conv2D"], target, 1 + 1e-3))
    comparison = compare_step(step, *batch)
    first = comparison.first_departure
    assert first is not None and first.ge_node == target, comparison.summary()
    assert first.within_isolated is False and first.verdict == "defect"
    assert comparison.first_defect.ge_node == target
    assert 5e-4 < first.isolated.scale_error < 2e-3
    # What depends on it is out of tolerance accumulated, but no other forward node is wrong on its own.
    assert not all(r.within for r in comparison.rows if r.ge_node != target)
    later = [r for r in comparison.rows if r.within_isolated is False and r.ge_node != target]
    assert all(r.ge_node.startswith("gradient_tape/") or r.tf_type == "Identity" for r in later), later[:3]


def _softmax_wrong_axis(executor, target: str):
    def run(node, inputs):
        if node.name != target:
            return executor(node, inputs)
        x = inputs[0].astype(np.float64)
        e = np.exp(x - x.max(axis=-2, keepdims=True))
        return [(e / e.sum(axis=-2, keepdims=True)).astype(inputs[0].dtype)]
    return run


def test_a_softmax_over_the_wrong_axis_is_the_first_departure(monkeypatch):
    step, batch = _attention_case(7)
    target = _first_of_type(step, batch, "SoftmaxV2")
    monkeypatch.setitem(EXECUTORS, "SoftmaxV2", _softmax_wrong_axis(EXECUTORS["SoftmaxV2"], target))
    comparison = compare_step(step, *batch)
    first = comparison.first_departure
    assert first is not None and first.ge_node == target, comparison.summary()
    assert first.verdict == "defect" and first.isolated.scale_error > 1e-4
    assert comparison.first_defect.ge_node == target


def test_dropout_is_compared_without_disabling_it():
    keras.utils.set_random_seed(2)
    model = keras.Sequential([keras.Input((12,)), layers.Dense(16, activation="relu"), layers.Dropout(0.4),
                              layers.Dense(5)])
    step = train_step(model, keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      tf_plugin.optimizers.PowerSign(0.01))
    batch = batches(2, tf.TensorSpec((9, 12)), tf.TensorSpec((9,), tf.int32), y_high=5)
    step(*batch(0))
    comparison = compare_step(step, *batch(1))
    assert comparison.first_departure is None, comparison.summary()
    random_rows = [r for r in comparison.rows if r.tf_type.startswith("StatelessRandom")]
    assert random_rows and all(r.metrics.max_abs == 0 for r in random_rows)


def test_the_tolerances_are_the_lowering_tables():
    for tf_op, (_, stated) in _table().items():
        assert tolerances.op_tolerance(tf_op) == _TOLERANCES[stated], tf_op


def test_control_flow_is_compared_on_the_functional_nodes_outputs():
    keras.utils.set_random_seed(4)
    model = keras.Sequential([keras.Input((5, 4)), layers.LSTM(6), layers.Dense(3)])  # a While over TensorLists
    optimizer = tf_plugin.optimizers.FusedEmaAdam(1e-2)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            error = y - model(x, training=True)
            loss = tf.cond(tf.reduce_sum(x) > 0, lambda: tf.reduce_mean(tf.square(error)),
                           lambda: tf.reduce_mean(tf.abs(error)))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    batch = batches(4, tf.TensorSpec((3, 5, 4)), tf.TensorSpec((3, 3)))
    step(*batch(0))
    comparison = compare_step(step, *batch(1))
    assert comparison.first_departure is None and comparison.first_defect is None, comparison.summary()
    functional = {r.ge_type for r in comparison.rows if r.isolated is None and r.ge_type not in ("Variable", "Const")}
    assert {"While", "StatelessIf"} <= functional, functional
    loop = next(r for r in comparison.rows if r.ge_type == "While")
    assert loop.tolerance == tolerances.PRODUCT  # its body's MatMuls


def test_a_mixed_bfloat16_step_is_within_at_every_node():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        keras.utils.set_random_seed(6)
        step = train_step(mlp(), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          tf_plugin.optimizers.FusedEmaAdam(1e-2))
        batch = batches(6, tf.TensorSpec((16, 12)), tf.TensorSpec((16,), tf.int32), y_high=5)
        step(*batch(0))
        comparison = compare_step(step, *batch(1))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert comparison.first_departure is None and comparison.first_defect is None, comparison.summary()
    assert any(r.dtype == "bfloat16" and r.tolerance == float(np.finfo(ml_dtypes.bfloat16).eps)
               for r in comparison.rows)  # a product in bfloat16: one rounding of it
    assert all(r.tolerance == tolerances.STEP_HALF for r in comparison.rows if r.ge_type == "Variable")


def test_compare_step_on_a_graph_with_unknown_dims_gives_the_static_graphs_rows():
    from tests.graph_ir.test_compare_dumps import unknown_rows_case

    step, template, static, batch = unknown_rows_case()
    rows = {g: compare_step(step, *batch, graph=graph).rows for g, graph in (("t", template), ("s", static))}
    assert rows["t"] and [(r.ge_node, r.output, r.shape, r.metrics) for r in rows["t"]] == \
        [(r.ge_node, r.output, r.shape, r.metrics) for r in rows["s"]]
    assert all(r.within for r in rows["t"])
