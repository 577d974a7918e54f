"""The depthwise family's limits and its grouped Conv2D executors: the gradients TF's CPU kernels compute otherwise
than GE's ops (dilations, EXPLICIT padding) refused, and NCHW, float64 and a filter of other channels refused naming
the node; the grouped Conv2D executors (graph_ir.executors.depthwise.GROUPED) against TF's grouped Conv2D and its
gradients, and the lowering's group count (graph_ir.lowering.ops.conv.conv_groups). The lowered ops against
TensorFlow: tests/graph_ir/test_depthwise_ops.py."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir.executors import depthwise as executors
from tests.graph_ir.test_family_ops import PRODUCT
from tests.helpers.depthwise import (
    OPS,
    depthwise_filter_grad,
    depthwise_forward,
    depthwise_input_grad,
    floats,
)
from tests.helpers.train_steps import scaled_difference


@pytest.mark.parametrize("op", OPS[1:])
def test_explicit_padding_gradients_are_refused_as_tensorflows_cpu_kernels_multiply_the_padding(op):
    """With EXPLICIT padding TF's CPU gradient kernels multiply the padding as zeros, so an inf meeting it gives NaN
    there, unlike SAME (and GE's pads, which contribute nothing): refused, naming the node and attr."""
    x, ones = np.ones((1, 5, 5, 1), np.float32), np.ones((3, 3, 1, 1), np.float32)
    dy, f = np.zeros((1, 5, 5, 1), np.float32), ones.copy()
    dy[0, 0, 0, 0], f[0, 0, 0, 0] = np.inf, np.inf
    first, second = (x, dy) if op.endswith("Filter") else (f, np.ones_like(dy))
    make = depthwise_filter_grad if op.endswith("Filter") else depthwise_input_grad
    shape = [3, 3, 1, 1] if op.endswith("Filter") else [1, 5, 5, 1]
    explicit, same = make(shape, (1, 1), "EXPLICIT", explicit=(0, 0, 1, 1, 1, 1, 0, 0)), make(shape, (1, 1), "SAME")
    assert np.isnan(explicit(first, second).numpy()).any() and not np.isnan(same(first, second).numpy()).any()
    spec = [tf.TensorSpec(first.shape, tf.float32), tf.TensorSpec(second.shape, tf.float32)]
    with pytest.raises(graph_ir.LoweringError, match=rf"{op} '{op}': padding 'EXPLICIT'; TF's CPU kernel multiplies"):
        graph_ir.from_tensorflow(tf.function(explicit), *spec)


@pytest.mark.parametrize("op", OPS[1:])
def test_dilated_gradients_are_refused_as_tensorflows_cpu_kernels_ignore_dilations(op):
    """TF's CPU kernels for the two gradients give the undilated gradient whatever the dilations, which is not the
    gradient of the dilated forward op (measured here by linearity: the forward op applied to each unit filter or
    input); GE's ops apply the dilations, so lowering would differ silently: refused, naming the node and attr."""
    rng = np.random.default_rng(7)
    x, f = floats(rng, 1, 6, 5, 2), floats(rng, 3, 3, 2, 1)
    forward = depthwise_forward((1, 1), "SAME", (2, 2))
    dy = floats(rng, *forward(x, f).shape)
    if op.endswith("Filter"):
        dilated = depthwise_filter_grad([3, 3, 2, 1], (1, 1), "SAME", (2, 2))
        plain = depthwise_filter_grad([3, 3, 2, 1], (1, 1), "SAME")
        first, unit_of = x, lambda e: forward(x, e)
    else:
        dilated = depthwise_input_grad([1, 6, 5, 2], (1, 1), "SAME", (2, 2))
        plain = depthwise_input_grad([1, 6, 5, 2], (1, 1), "SAME")
        first, unit_of = f, lambda e: forward(e, f)
    shape = f.shape if op.endswith("Filter") else x.shape
    true = np.zeros(shape)
    for index in np.ndindex(shape):
        unit = np.zeros(shape, np.float32)
        unit[index] = 1
        true[index] = np.sum(unit_of(unit).numpy() * dy)
    tf_dilated = dilated(first, dy).numpy()
    np.testing.assert_array_equal(tf_dilated, plain(first, dy).numpy())  # dilations ignored
    assert scaled_difference(tf_dilated, true) > 0.1  # and not the dilated op's gradient
    spec = [tf.TensorSpec(first.shape, tf.float32), tf.TensorSpec(dy.shape, tf.float32)]
    with pytest.raises(graph_ir.LoweringError, match=rf"{op} '{op}': dilations \[1, 2, 2, 1\]; TF's CPU kernel ignores"):
        graph_ir.from_tensorflow(tf.function(dilated), *spec)


def test_nchw_is_refused_naming_the_node():
    step = tf.function(lambda x, f: tf.raw_ops.DepthwiseConv2dNative(input=x, filter=f, strides=[1, 1, 1, 1],
                                                                      padding="SAME", data_format="NCHW"))
    with pytest.raises(graph_ir.LoweringError, match=r"DepthwiseConv2dNative 'DepthwiseConv2dNative'.*NCHW"):
        graph_ir.from_tensorflow(step, tf.TensorSpec((1, 3, 5, 5), tf.float32), tf.TensorSpec((3, 3, 3, 2),
                                                                                              tf.float32))


def test_float64_is_refused_as_ge_declares_no_double_depthwise_convolution():
    step = tf.function(lambda x, f: tf.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "SAME"))
    with pytest.raises(graph_ir.LoweringError, match=r"DepthwiseConv2D.*'x' has dtype float64"):
        graph_ir.from_tensorflow(step, tf.TensorSpec((1, 5, 5, 3), tf.float64),
                                 tf.TensorSpec((3, 3, 3, 2), tf.float64))


def test_a_filter_of_other_channels_is_refused_naming_the_node_and_filter():
    graph = graph_ir.Graph("bad")
    with graph, pytest.raises(graph_ir.GraphError, match=r"DepthwiseConv2D 'dw'.*filter must be \[kh, kw, C, "
                                                          r"multiplier\] with C = the input's 3 channels, got \[3, 3, 2, 1\]"):
        x, f = graph_ir.Data(0, "float32", (1, 5, 5, 3)), graph_ir.Const(np.zeros((3, 3, 2, 1), np.float32))
        graph.add_node("DepthwiseConv2D", [x, f], {"strides": [1, 1, 1, 1], "pads": [1, 1, 1, 1]}, name="dw")


# Grouped Conv2D (x [N, H, W, C], filter [kh, kw, C/g, O]): TF's CPU kernels run it (in and out of tf.function);
# graph_ir.executors.depthwise.GROUPED holds its executors, for the conv family to dispatch to when groups > 1.
# (x shape, filter shape, stride, padding, dilation)
GROUPED_GEOMETRIES = {
    "same-s1-g2": ((2, 7, 6, 4), (3, 3, 2, 6), 1, "SAME", 1),
    "valid-s2-g3": ((2, 9, 8, 6), (3, 2, 2, 9), 2, "VALID", 1),
    "same-s2-odd-g4": ((1, 7, 5, 8), (4, 3, 2, 4), 2, "SAME", 1),
    "dilated-same-g2": ((2, 8, 7, 4), (3, 3, 2, 4), 1, "SAME", 2),
}


def _fake_node(attrs: dict, shape, dtype: str = "float32"):
    """What an executor reads of a node: its attrs and its output's dtype and shape."""
    from types import SimpleNamespace

    from graph_ir.ir.dtypes import BY_NAME
    from graph_ir.ir.nodes import TensorDesc
    return SimpleNamespace(attrs=attrs, output_descs=[TensorDesc("y", BY_NAME[dtype], tuple(shape))])


@pytest.mark.parametrize("geometry", list(GROUPED_GEOMETRIES))
def test_grouped_conv2d_executors_run_like_tensorflows_grouped_conv2d(geometry):
    """Forward and both gradients against tf.raw_ops.Conv2D, Conv2DBackpropFilter and Conv2DBackpropInput with a
    grouped filter, within 1e-5 of the output's scale. float32 only: TF's float64 CPU kernels refuse groups."""
    from graph_ir.opset.conv import same_padding
    x_shape, f_shape, s, padding, d = GROUPED_GEOMETRIES[geometry]
    rng = np.random.default_rng(zlib.crc32(geometry.encode()))
    x, f = floats(rng, *x_shape), floats(rng, *f_shape)
    common = {"strides": [1, s, s, 1], "padding": padding, "dilations": [1, d, d, 1]}
    y = tf.raw_ops.Conv2D(input=x, filter=f, **common).numpy()
    dy = floats(rng, *y.shape)
    pads = [0, 0, 0, 0] if padding == "VALID" else [
        *same_padding(x_shape[1], f_shape[0], s, d)[1:], *same_padding(x_shape[2], f_shape[1], s, d)[1:]]
    attrs = {"strides": [1, s, s, 1], "pads": pads, "dilations": [1, d, d, 1], "groups": x_shape[3] // f_shape[2]}
    for op, args, want in (
            ("Conv2D", [x, f], y),
            ("Conv2DBackpropFilter", [x, None, dy],
             tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=f_shape, out_backprop=dy, **common).numpy()),
            ("Conv2DBackpropInput", [None, f, dy],
             tf.raw_ops.Conv2DBackpropInput(input_sizes=x_shape, filter=f, out_backprop=dy, **common).numpy())):
        (got,) = executors.GROUPED[op](_fake_node(attrs, want.shape), args)
        assert got.dtype == want.dtype and got.shape == want.shape, op
        assert scaled_difference(got, want) <= PRODUCT, (op, scaled_difference(got, want))


def test_conv_groups_reads_the_group_count_and_refuses_channels_that_do_not_divide():
    from types import SimpleNamespace

    from graph_ir.lowering.ops.conv import conv_groups
    node = SimpleNamespace(op="Conv2D", name="conv")
    assert conv_groups(node, 8, 2, 12) == 4 and conv_groups(node, 3, 3, 5) == 1
    for channels in ((8, 3, 12), (8, 2, 10), (8, 0, 4)):
        with pytest.raises(graph_ir.LoweringError, match=r"Conv2D 'conv': x has \d+ channels and the filter \d+ inputs"):
            conv_groups(node, *channels)
