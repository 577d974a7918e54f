"""The conv family's TF ops (graph_ir/lowering/ops/conv.py), each alone in a tf.function: lowered, run in
graph_ir.Session and compared with TensorFlow on fresh random inputs with zeros and ties, odd sizes, strides 1 and 2,
SAME and VALID padding and dilations, within the tolerances of the README's lowering table."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from tests.graph_ir.test_family_ops import PRODUCT, ROUNDING
from tests.helpers.train_steps import scaled_difference


def _floats(rng, *shape, ties: bool = False):
    x = rng.standard_normal(shape).astype(np.float32)
    if ties:  # a few values only: windows with several maxima
        x = np.round(x).astype(np.float32)
    x.reshape(-1)[::5] = 0
    return x


def _conv(strides, padding, dilations=1):
    return lambda x, f: tf.nn.conv2d(x, f, strides, padding, dilations=dilations)


def _filter_grad(strides, padding, shape):
    return lambda x, dy: tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=shape, out_backprop=dy,
                                                         strides=[1, strides, strides, 1], padding=padding)


def _input_grad(strides, padding, shape):
    return lambda f, dy: tf.raw_ops.Conv2DBackpropInput(input_sizes=shape, filter=f, out_backprop=dy,
                                                        strides=[1, strides, strides, 1], padding=padding)


def _max_pool_grad(k, s, padding):
    def fn(x, dy):
        return tf.raw_ops.MaxPoolGrad(orig_input=x, orig_output=tf.nn.max_pool2d(x, k, s, padding), grad=dy,
                                      ksize=[1, k, k, 1], strides=[1, s, s, 1], padding=padding)
    return fn


def _avg_pool_grad(k, s, padding, shape):
    return lambda dy: tf.raw_ops.AvgPoolGrad(orig_input_shape=shape, grad=dy, ksize=[1, k, k, 1],
                                             strides=[1, s, s, 1], padding=padding)


CASES = {
    "Conv2D-same-s1": (_conv(1, "SAME"), lambda r: [_floats(r, 2, 7, 5, 3), _floats(r, 3, 3, 3, 4)], PRODUCT),
    "Conv2D-valid-s2": (_conv(2, "VALID"), lambda r: [_floats(r, 2, 9, 8, 3), _floats(r, 3, 2, 3, 5)], PRODUCT),
    "Conv2D-same-s2-odd": (_conv(2, "SAME"), lambda r: [_floats(r, 1, 7, 6, 2), _floats(r, 4, 3, 2, 3)], PRODUCT),
    "Conv2D-dilated": (_conv(1, "SAME", 2), lambda r: [_floats(r, 2, 8, 7, 3), _floats(r, 3, 3, 3, 2)], PRODUCT),
    "Conv2DBackpropFilter-same-s2": (_filter_grad(2, "SAME", [3, 3, 3, 4]),
                                     lambda r: [_floats(r, 2, 7, 6, 3), _floats(r, 2, 4, 3, 4)], PRODUCT),
    "Conv2DBackpropFilter-valid": (_filter_grad(1, "VALID", [2, 3, 3, 2]),
                                   lambda r: [_floats(r, 2, 5, 6, 3), _floats(r, 2, 4, 4, 2)], PRODUCT),
    "Conv2DBackpropInput-same-s2": (_input_grad(2, "SAME", [2, 7, 6, 3]),
                                    lambda r: [_floats(r, 3, 3, 3, 4), _floats(r, 2, 4, 3, 4)], PRODUCT),
    "Conv2DBackpropInput-valid": (_input_grad(1, "VALID", [2, 5, 6, 3]),
                                  lambda r: [_floats(r, 2, 3, 3, 2), _floats(r, 2, 4, 4, 2)], PRODUCT),
    "MaxPool-valid": (lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID"), lambda r: [_floats(r, 2, 7, 6, 3)], 0),
    "MaxPool-same-overlap": (lambda x: tf.nn.max_pool2d(x, 3, 2, "SAME"), lambda r: [_floats(r, 2, 7, 6, 3)], 0),
    "AvgPool-valid": (lambda x: tf.nn.avg_pool2d(x, 2, 2, "VALID"), lambda r: [_floats(r, 2, 7, 6, 3)], ROUNDING),
    "AvgPool-same": (lambda x: tf.nn.avg_pool2d(x, 3, 2, "SAME"), lambda r: [_floats(r, 2, 7, 6, 3)], ROUNDING),
    "MaxPoolGrad-ties": (_max_pool_grad(2, 2, "VALID"),
                         lambda r: [_floats(r, 2, 6, 6, 3, ties=True), _floats(r, 2, 3, 3, 3)], 0),
    "MaxPoolGrad-same-overlap-ties": (_max_pool_grad(3, 2, "SAME"),
                                      lambda r: [_floats(r, 1, 7, 6, 2, ties=True), _floats(r, 1, 4, 3, 2)], ROUNDING),
    "AvgPoolGrad-valid": (_avg_pool_grad(2, 2, "VALID", [2, 7, 6, 3]), lambda r: [_floats(r, 2, 3, 3, 3)], ROUNDING),
    "AvgPoolGrad-same": (_avg_pool_grad(3, 2, "SAME", [1, 7, 6, 2]), lambda r: [_floats(r, 1, 4, 3, 2)], ROUNDING),
}


@pytest.mark.parametrize("name", list(CASES))
def test_lowered_conv_op_runs_like_tensorflow(name):
    fn, make_inputs, tolerance = CASES[name]
    inputs = make_inputs(np.random.default_rng(zlib.crc32(name.encode())))
    step = tf.function(fn)
    graph = graph_ir.from_tensorflow(step, *[tf.TensorSpec(x.shape, tf.float32) for x in inputs])
    assert name.split("-")[0] in {n.type for n in graph.nodes.values()}
    session = graph_ir.Session()
    session.add_graph(0, graph)
    (got,) = session.run_graph(0, inputs)
    want = step(*inputs).numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    if tolerance == 0:
        np.testing.assert_array_equal(got, want)
    else:
        assert scaled_difference(got, want) <= tolerance, scaled_difference(got, want)


def test_nchw_convolution_is_refused_naming_the_node():
    step = tf.function(lambda x, f: tf.raw_ops.Conv2D(input=x, filter=f, strides=[1, 1, 1, 1], padding="SAME",
                                                      data_format="NCHW"))
    with pytest.raises(graph_ir.LoweringError, match=r"Conv2D 'Conv2D'.*NCHW"):
        graph_ir.from_tensorflow(step, tf.TensorSpec((1, 3, 5, 5), tf.float32), tf.TensorSpec((3, 3, 3, 2), tf.float32))
