"""compare_step's verdicts beyond a wrong executor: a wrong constant in the lowered graph is a defect."""

from __future__ import annotations

import keras
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
