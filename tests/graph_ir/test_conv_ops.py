"""The conv family's TF ops (graph_ir/lowering/ops/conv.py), each alone in a tf.function: lowered, run in
graph_ir.Session and compared with TensorFlow on fresh random inputs with zeros and ties, odd sizes, strides 1 and 2,
SAME and VALID padding and dilations, within the tolerances of docs/lowering.md's lowering table."""

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


def _explicit_filter_grad(shape, pads):
    return lambda x, dy: tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=shape, out_backprop=dy,
                                                         strides=[1, 2, 1, 1], padding="EXPLICIT",
                                                         explicit_paddings=pads)


def _explicit_input_grad(shape, pads):
    return lambda f, dy: tf.raw_ops.Conv2DBackpropInput(input_sizes=shape, filter=f, out_backprop=dy,
                                                        strides=[1, 2, 1, 1], padding="EXPLICIT",
                                                        explicit_paddings=pads)


def _dilated_grad(op, shape):
    def fn(a, dy):
        first = {"Conv2DBackpropFilter": {"input": a, "filter_sizes": shape},
                 "Conv2DBackpropInput": {"input_sizes": shape, "filter": a}}[op]
        return getattr(tf.raw_ops, op)(**first, out_backprop=dy, strides=[1, 1, 1, 1], padding="SAME",
                                       dilations=[1, 2, 3, 1])
    return fn


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
    "Conv2D-explicit": (lambda x, f: tf.raw_ops.Conv2D(input=x, filter=f, strides=[1, 2, 1, 1], padding="EXPLICIT",
                                                       explicit_paddings=[0, 0, 1, 2, 0, 3, 0, 0]),
                        lambda r: [_floats(r, 2, 7, 6, 3), _floats(r, 3, 3, 3, 4)], PRODUCT),
    "Conv2D-dilated-valid-s2": (lambda x, f: tf.nn.conv2d(x, f, 2, "VALID", dilations=[2, 3]),
                                lambda r: [_floats(r, 2, 9, 10, 3), _floats(r, 3, 2, 3, 4)], PRODUCT),
    "Conv2D-kernel-larger-than-input": (_conv(1, "SAME"), lambda r: [_floats(r, 1, 2, 3, 3), _floats(r, 5, 5, 3, 2)],
                                        PRODUCT),
    "Conv2DBackpropFilter-explicit": (_explicit_filter_grad([3, 3, 3, 2], [0, 0, 1, 0, 2, 1, 0, 0]),
                                      lambda r: [_floats(r, 2, 7, 6, 3), _floats(r, 2, 3, 7, 2)], PRODUCT),
    "Conv2DBackpropFilter-dilated": (_dilated_grad("Conv2DBackpropFilter", [3, 3, 3, 2]),
                                     lambda r: [_floats(r, 2, 7, 8, 3), _floats(r, 2, 7, 8, 2)], PRODUCT),
    "Conv2DBackpropFilter-valid-s2-remainder": (_filter_grad(2, "VALID", [3, 3, 2, 2]),
                                                lambda r: [_floats(r, 1, 8, 9, 2), _floats(r, 1, 3, 4, 2)], PRODUCT),
    "Conv2DBackpropInput-explicit": (_explicit_input_grad([2, 7, 6, 3], [0, 0, 1, 0, 2, 1, 0, 0]),
                                     lambda r: [_floats(r, 3, 3, 3, 2), _floats(r, 2, 3, 7, 2)], PRODUCT),
    "Conv2DBackpropInput-dilated": (_dilated_grad("Conv2DBackpropInput", [2, 7, 8, 3]),
                                    lambda r: [_floats(r, 3, 3, 3, 2), _floats(r, 2, 7, 8, 2)], PRODUCT),
    "Conv2DBackpropInput-valid-s2-remainder": (_input_grad(2, "VALID", [1, 8, 9, 2]),
                                               lambda r: [_floats(r, 3, 3, 2, 2), _floats(r, 1, 3, 4, 2)], PRODUCT),
    "MaxPool-valid": (lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID"), lambda r: [_floats(r, 2, 7, 6, 3)], 0),
    "MaxPool-same-ties": (lambda x: tf.nn.max_pool2d(x, 3, 2, "SAME"), lambda r: [_floats(r, 2, 9, 8, 3, ties=True)],
                          0),
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


def _special_values(rng, shape):
    """Rounded normals (ties) with NaN, +-inf and the lowest float32 sprinkled in, one channel all -inf and one all
    NaN: the values where max pooling's rules (NaN skipped, windows start at the lowest finite value) show."""
    x = np.round(rng.standard_normal(shape) * 2).astype(np.float32)
    flat = x.reshape(-1)
    for value, step in ((np.nan, 7), (np.inf, 11), (-np.inf, 5), (np.finfo(np.float32).min, 13)):
        flat[rng.integers(0, flat.size, flat.size // step)] = value
    x[..., 0], x[..., 1] = -np.inf, np.nan
    return x


@pytest.mark.parametrize("k, s, padding", [(2, 2, "VALID"), (3, 2, "SAME"), (3, 1, "SAME"), (2, 1, "VALID")])
def test_max_pool_and_its_gradient_are_bitwise_tensorflows_on_nan_inf_and_ties(k, s, padding):
    """In a tf.function TF's max pool skips NaN and starts each window at the lowest finite value, and its gradient
    goes to the first strictly greater element from there (a window without one: its first position, dropped if
    that is padding). Integer-valued gradients (one NaN, one inf) keep overlapping windows' sums exact."""
    rng = np.random.default_rng(zlib.crc32(f"{k}{s}{padding}".encode()))
    x = _special_values(rng, (2, 7, 6, 4))
    pool = tf.function(lambda x: tf.nn.max_pool2d(x, k, s, padding))
    dy = rng.integers(-8, 9, pool(x).shape).astype(np.float32)
    dy.reshape(-1)[3], dy.reshape(-1)[8] = np.nan, np.inf
    grad = tf.function(lambda x, dy: tf.raw_ops.MaxPoolGrad(orig_input=x, orig_output=tf.nn.max_pool2d(
        x, k, s, padding), grad=dy, ksize=[1, k, k, 1], strides=[1, s, s, 1], padding=padding))
    for fn, inputs in ((pool, [x]), (grad, [x, dy])):
        graph = graph_ir.from_tensorflow(fn, *[tf.TensorSpec(a.shape, tf.float32) for a in inputs])
        session = graph_ir.Session()
        session.add_graph(0, graph)
        (got,) = session.run_graph(0, inputs)
        np.testing.assert_array_equal(got, fn(*inputs).numpy())


@pytest.mark.parametrize("fn, specs, message", [
    (lambda x: tf.raw_ops.MaxPool(input=x, ksize=[1, 1, 2, 2], strides=[1, 1, 2, 2], padding="VALID",
                                  data_format="NCHW"), [(1, 3, 4, 4)], r"MaxPool 'MaxPool'.*data_format 'NCHW'"),
    (lambda x: tf.raw_ops.AvgPool(value=x, ksize=[1, 1, 2, 2], strides=[1, 1, 2, 2], padding="VALID",
                                  data_format="NCHW"), [(1, 3, 4, 4)], r"AvgPool 'AvgPool'.*data_format 'NCHW'"),
    (lambda x: tf.raw_ops.MaxPool(input=x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="EXPLICIT",
                                  explicit_paddings=[0, 0, 1, 0, 0, 1, 0, 0]), [(1, 4, 4, 3)],
     r"MaxPool 'MaxPool'.*padding must be SAME or VALID, got 'EXPLICIT'"),
    (lambda x: tf.raw_ops.MaxPool(input=x, ksize=[1, 2, 2, 2], strides=[1, 2, 2, 1], padding="VALID"),
     [(1, 4, 4, 4)], r"MaxPool 'MaxPool'.*ksize must be \[1, h, w, 1\]"),
])
def test_pools_graph_ir_cannot_run_are_refused_naming_the_node_and_attr(fn, specs, message):
    with pytest.raises(graph_ir.LoweringError, match=message):
        graph_ir.from_tensorflow(tf.function(fn), *[tf.TensorSpec(s, tf.float32) for s in specs])


def test_float64_convolution_is_refused_as_ge_declares_no_double_conv2d():
    step = tf.function(lambda x, f: tf.nn.conv2d(x, f, 1, "SAME"))
    with pytest.raises(graph_ir.LoweringError, match=r"Conv2D 'Conv2D'.*'x' has dtype float64"):
        graph_ir.from_tensorflow(step, tf.TensorSpec((1, 5, 5, 3), tf.float64), tf.TensorSpec((3, 3, 3, 2),
                                                                                              tf.float64))
