"""Grouped Conv2D (x [N, H, W, C], filter [kh, kw, C/g, O]; Keras Conv2D(groups=g)) lowered onto GE's Conv2D family
with attr `groups` (CANN's Conv2D REG_OP), run by graph_ir.executors.depthwise.GROUPED: each TF op alone against
tf.raw_ops.Conv2D and its gradients with grouped filters (within PRODUCT of the output's scale); whole Keras steps
with groups 2 and 4 (K steps, every weight, slot and counter within the float32 step tolerance); the prototype's
refusals; and the planner's working memory bounding what the grouped executors allocate."""

from __future__ import annotations

import re
import zlib

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import layers

import graph_ir
from graph_ir import ops
from tests.graph_ir.test_conv_ops import _floats
from tests.graph_ir.test_family_ops import PRODUCT
from tests.graph_ir.test_lowering_steps import FLOAT32_TOLERANCE, OPTIMIZERS, SPARSE_XENT
from tests.helpers import train_steps
from tests.helpers.hostile_graphs import planned_bytes, run_measured
from tests.helpers.train_steps import scaled_difference


def _conv(s, padding, d=1):
    return lambda x, f: tf.raw_ops.Conv2D(input=x, filter=f, strides=[1, s, s, 1], padding=padding,
                                          dilations=[1, d, d, 1])


def _filter_grad(s, padding, shape):
    return lambda x, dy: tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=shape, out_backprop=dy,
                                                         strides=[1, s, s, 1], padding=padding)


def _input_grad(s, padding, shape):
    return lambda f, dy: tf.raw_ops.Conv2DBackpropInput(input_sizes=shape, filter=f, out_backprop=dy,
                                                        strides=[1, s, s, 1], padding=padding)


# name -> (TF function, inputs from a rng, tolerance); the name's first part is the GE op (docs/lowering.md's table row)
CASES = {
    "Conv2D-grouped2-same": (_conv(1, "SAME"), lambda r: [_floats(r, 2, 7, 6, 4), _floats(r, 3, 3, 2, 6)], PRODUCT),
    "Conv2D-grouped3-valid-s2": (_conv(2, "VALID"), lambda r: [_floats(r, 2, 9, 8, 6), _floats(r, 3, 2, 2, 9)],
                                 PRODUCT),
    "Conv2D-grouped4-dilated": (_conv(1, "SAME", 2), lambda r: [_floats(r, 1, 8, 7, 8), _floats(r, 3, 3, 2, 4)],
                                PRODUCT),
    "Conv2D-grouped8-depthwise-like": (_conv(2, "SAME"), lambda r: [_floats(r, 2, 7, 5, 8), _floats(r, 4, 3, 1, 8)],
                                       PRODUCT),
    "Conv2DBackpropFilter-grouped2-same-s2": (_filter_grad(2, "SAME", [3, 3, 2, 6]),
                                              lambda r: [_floats(r, 2, 7, 6, 4), _floats(r, 2, 4, 3, 6)], PRODUCT),
    "Conv2DBackpropFilter-grouped4-valid": (_filter_grad(1, "VALID", [2, 3, 2, 4]),
                                            lambda r: [_floats(r, 2, 5, 6, 8), _floats(r, 2, 4, 4, 4)], PRODUCT),
    "Conv2DBackpropInput-grouped2-same-s2": (_input_grad(2, "SAME", [2, 7, 6, 4]),
                                             lambda r: [_floats(r, 3, 3, 2, 6), _floats(r, 2, 4, 3, 6)], PRODUCT),
    "Conv2DBackpropInput-grouped4-valid": (_input_grad(1, "VALID", [2, 5, 6, 8]),
                                           lambda r: [_floats(r, 2, 3, 2, 4), _floats(r, 2, 4, 4, 4)], PRODUCT),
}


@pytest.mark.parametrize("name", list(CASES))
def test_lowered_grouped_conv_op_runs_like_tensorflow(name):
    fn, make_inputs, tolerance = CASES[name]
    inputs = make_inputs(np.random.default_rng(zlib.crc32(name.encode())))
    step = tf.function(fn)
    graph = graph_ir.from_tensorflow(step, *[tf.TensorSpec(x.shape, tf.float32) for x in inputs])
    (conv,) = graph.nodes_of_type(name.split("-")[0])
    assert conv.attrs["groups"] == int(re.search(r"grouped(\d+)", name).group(1))
    session = graph_ir.Session()
    session.add_graph(0, graph)
    (got,) = session.run_graph(0, inputs)
    want = step(*inputs).numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    assert scaled_difference(got, want) <= tolerance, scaled_difference(got, want)


def test_a_nan_filter_tap_meeting_only_padding_leaves_the_outputs_finite_as_in_tensorflow():
    rng = np.random.default_rng(3)
    x, f = _floats(rng, 1, 5, 5, 4), _floats(rng, 3, 3, 2, 4)
    f[0, 0] = np.nan  # the top-left tap reads padding only for the first output row and column
    step = tf.function(_conv(1, "SAME"))
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.from_tensorflow(step, tf.TensorSpec(x.shape), tf.TensorSpec(f.shape)))
    (got,) = session.run_graph(0, [x, f])
    want = step(x, f).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isfinite(got[0, 0]).all() and scaled_difference(np.nan_to_num(got), np.nan_to_num(want)) <= PRODUCT


def _grouped_model(groups: int) -> keras.Model:
    return keras.Sequential([keras.Input((7, 6, 8)),
                             layers.Conv2D(8, 3, padding="same", groups=groups, activation="relu"),
                             layers.Conv2D(8, 2, strides=2, groups=groups), layers.Flatten(), layers.Dense(5)])


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("groups", [2, 4])
def test_keras_grouped_conv2d_step(groups, optimizer, tmp_path):
    keras.utils.set_random_seed(10 + groups)
    model, opt = _grouped_model(groups), OPTIMIZERS[optimizer]()
    opt.build(model.trainable_variables)  # its slots exist now, so all of them are compared
    step = train_steps.train_step(model, SPARSE_XENT, opt)
    specs = [tf.TensorSpec((3, 7, 6, 8), tf.float32), tf.TensorSpec((3,), tf.int32)]
    graph, differences, loss = train_steps.lower_and_compare(
        step, specs, train_steps.batches(groups, *specs, y_high=5), [*model.variables, *opt.variables],
        str(tmp_path))
    convs = [n for n in graph.nodes.values() if n.type.startswith("Conv2D")]
    assert {n.type for n in convs} == {"Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput"}
    assert all(n.attrs["groups"] == groups for n in convs)
    assert len(differences) == len(model.variables) + len(opt.variables) - len(graph.frozen_variables)
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert loss <= FLOAT32_TOLERANCE


_S1 = {"strides": [1, 1, 1, 1], "pads": [1, 1, 1, 1]}


@pytest.mark.parametrize("x_shape, f_shape, groups, message", [
    ((1, 5, 5, 6), (3, 3, 2, 6), 2, r"x has 6 channels and the filter 2 inputs and 6 outputs with groups 2; expected"),
    ((1, 5, 5, 4), (3, 3, 2, 5), 2, r"x has 4 channels .* and 5 outputs with groups 2; .*divisible by groups"),
    ((1, 5, 5, 4), (3, 3, 4, 4), 0, r"x has 4 channels .* with groups 0"),
])
def test_groups_that_do_not_fit_the_channels_are_refused_naming_the_node(x_shape, f_shape, groups, message):
    graph = graph_ir.Graph("bad")
    with graph, pytest.raises(graph_ir.GraphError, match=r"Conv2D 'conv': " + message):
        ops.Conv2D(graph_ir.Data(0, "float32", x_shape), np.zeros(f_shape, np.float32), groups=groups, name="conv",
                   **_S1)


def test_a_bias_with_groups_is_refused_naming_the_node():
    graph = graph_ir.Graph("bad")
    with graph, pytest.raises(graph_ir.GraphError, match=r"Conv2D 'conv': input 'bias' with groups 2"):
        ops.Conv2D(graph_ir.Data(0, "float32", (1, 5, 5, 4)), np.zeros((3, 3, 2, 4), np.float32),
                   np.zeros(4, np.float32), groups=2, name="conv", **_S1)


def _memory_cases():
    rng = np.random.default_rng(0)
    x, f, dy = _floats(rng, 4, 24, 20, 16), _floats(rng, 3, 3, 4, 8), _floats(rng, 4, 24, 20, 8)
    grouped = {**_S1, "groups": 4}
    return [
        ("conv", lambda x, f: ops.Conv2D(x, f, **grouped), [x, f]),
        ("conv-float16", lambda x, f: ops.Conv2D(x, f, **grouped), [x.astype(np.float16), f.astype(np.float16)]),
        ("filter-grad", lambda x, dy: ops.Conv2DBackpropFilter(x, np.array(f.shape, np.int32), dy, **grouped),
         [x, dy]),
        ("input-grad-float64", lambda f, dy: ops.Conv2DBackpropInput(np.array(x.shape, np.int32), f, dy, **grouped),
         [f.astype(np.float64), dy.astype(np.float64)]),
    ]


@pytest.mark.parametrize("case", _memory_cases(), ids=lambda c: c[0])
def test_the_plan_bounds_what_a_grouped_run_allocates(case):
    _, build, inputs = case
    graph = graph_ir.Graph("memory")
    with graph:
        graph.set_outputs([build(*[graph_ir.Data(k, str(a.dtype), a.shape) for k, a in enumerate(inputs)])])
    planned = planned_bytes(graph)
    _, allocated, _ = run_measured(graph, inputs)
    assert allocated <= planned + 64 * 1024, (allocated, planned)
