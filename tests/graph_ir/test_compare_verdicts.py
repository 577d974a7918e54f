"""compare_step's verdicts beyond a wrong executor: a wrong constant in the lowered graph is a defect; a node far from
TF but near the exact (float64) value is TF's rounding, not a defect."""

from __future__ import annotations

import keras
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from keras import layers

from graph_ir.compare import compare_step
from graph_ir.lowering.entry import from_tensorflow
from tests.helpers.train_steps import batches, train_step


def conv_bias_bn_case(seed: int = 1):
    """Conv2D with a bias, BatchNormalization, relu, global pooling, Dense; Adam: the step, a batch, its graph."""
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((6, 6, 3)), layers.Conv2D(4, 3, use_bias=True),
                              layers.BatchNormalization(), layers.Activation("relu"),
                              layers.GlobalAveragePooling2D(), layers.Dense(3)])
    step = train_step(model, keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      keras.optimizers.Adam(1e-2))
    batch = batches(seed, tf.TensorSpec((4, 6, 6, 3)), tf.TensorSpec((4,), tf.int32), y_high=3)
    step(*batch(0))  # builds the optimizer's state
    arrays = batch(1)
    graph = from_tensorflow(step, *(tf.TensorSpec(a.shape, tf.dtypes.as_dtype(a.dtype)) for a in arrays))
    return step, arrays, graph


@pytest.mark.parametrize(("suffix", "wrong"), [("/batchnorm/add/y", np.float32(1.0)),  # epsilon 1e-3
                                                ("/Mean/reduction_indices", np.array([0, 1], np.int32))])  # [1, 2]
def test_a_wrong_constant_in_the_lowered_graph_is_the_first_defect(suffix, wrong):
    step, arrays, graph = conv_bias_bn_case()
    name = next(n for n in graph.nodes if n.endswith(suffix) and not n.startswith("gradient_tape"))
    const = graph.nodes[name]
    assert const.type == "Const"
    right = np.asarray(const.attrs["value"])
    const.attrs["value"] = np.asarray(wrong, right.dtype).reshape(right.shape)
    comparison = compare_step(step, *arrays, graph=graph)
    first = comparison.first_defect
    assert first is not None and first.ge_node == name, comparison.summary()
    assert first.verdict == "defect" and first.within_isolated is False and first.isolated.max_abs > 0
    # What reads it ran isolated on the graph's constant, not on TF's: it departs from TF there too.
    readers = [r for r in comparison.rows if r.isolated is not None and r.ge_node != name
               and any(h is not None and h.node.name == name for h in graph.nodes[r.ge_node].inputs)]
    assert readers and any(r.isolated.max_abs > 0 for r in readers), readers


def test_the_clean_graph_has_no_defect_and_its_constants_are_rows():
    step, arrays, graph = conv_bias_bn_case()
    comparison = compare_step(step, *arrays, graph=graph)
    assert comparison.first_defect is None, comparison.summary()
    consts = [r for r in comparison.rows if r.ge_type == "Const"]
    assert consts and all(r.within_isolated is True for r in consts)


def _bias_add_grad(x):
    return tf.raw_ops.BiasAddGrad(out_backprop=x)


def _sum_over_rows(x):
    return tf.reduce_sum(x, axis=0)


@pytest.mark.parametrize(("fn", "dtype"), [(_bias_add_grad, ml_dtypes.bfloat16), (_sum_over_rows, np.float16)])
def test_where_tf_rounds_farther_from_exact_than_ge_it_is_no_defect(fn, dtype):
    # 8192 terms near 1 per output: TF sums them in the half dtype and stalls far below the sum; GE is one rounding
    # off the float64 value.
    x = (np.random.default_rng(0).random((8192, 4)) + 0.5).astype(dtype)
    comparison = compare_step(tf.function(fn), x)
    row = next(r for r in comparison.rows if r.ge_type in ("BiasAddGrad", "ReduceSum"))
    assert row.isolated_error > row.tolerance  # far from TF
    assert row.ge_exact_error <= row.tolerance < 0.1 < row.tf_exact_error, (row.ge_exact_error, row.tf_exact_error)
    assert row.verdict == "tf-farther" and row.within_isolated is True
    assert comparison.first_defect is None, comparison.summary()
    table = comparison.table_rows()
    cells = next(t for t in table if t[0] == row.ge_node)
    assert float(cells[table[0].index("TFExactError")]) > 0.1 > float(cells[table[0].index("GEExactError")])
    assert "tf-farther" in cells


def test_the_gradient_of_a_bias_before_batch_normalization_is_noise():
    # BatchNormalization subtracts any constant shift: the conv bias's gradient is zero in exact arithmetic, and
    # both runs hold rounding noise there, which differs by more than its own scale.
    step, arrays, graph = conv_bias_bn_case()
    comparison = compare_step(step, *arrays, graph=graph)
    noise = [r for r in comparison.rows if r.verdict == "noise"]
    assert [r.ge_type for r in noise] == ["BiasAddGrad"], [(r.ge_node, r.verdict) for r in noise]
    row = noise[0]
    assert not row.within and row.metrics.scale_error > 0.1 and row.within_isolated
    assert "within; 1 noise" in comparison.summary()
    assert comparison.first_defect is None
    # The weights' gradients, out of the same Conv2D, are not noise.
    assert all(not r.noise for r in comparison.rows if r.ge_type == "Conv2DBackpropFilter")


def test_the_table_fits_120_columns_and_wide_keeps_every_column():
    step, arrays, graph = conv_bias_bn_case()
    comparison = compare_step(step, *arrays, graph=graph)
    table, _, summary = comparison.format_table().partition("\n\n")
    lines = table.splitlines()
    assert len(lines) == len(comparison.rows) + 1 and summary == comparison.summary()
    assert max(map(len, lines)) <= 120 < max(len(r.ge_node) for r in comparison.rows) + 80
    assert any(line.startswith("…") for line in lines)  # long names cut from the left
    bias_grad = next(line for line in lines if "BiasAddGrad" in line)
    assert bias_grad.count("BiasAddGrad") == 2 and " = " in bias_grad  # the TF node is shown once
    wide = comparison.format_table(wide=True).splitlines()
    assert wide[0].split("  ")[0] == "GENode" and len(wide[0].split()) >= len(comparison.table_rows()[0])
    assert all(r.ge_node in "\n".join(wide) for r in comparison.rows)  # nothing cut
    departing = comparison.format_table(ok_rows=False).splitlines()
    not_ok = [r for r in comparison.rows if r.verdict != "ok"]
    assert len(departing[1:departing.index("")]) == len(not_ok)
    assert f"{len(comparison.rows) - len(not_ok)} more rows, ok, not shown" in departing
