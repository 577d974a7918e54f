"""The conv family's executors against hostile graphs (issue 27), what they cost and what they refuse: huge pads
and windows cost only what touches the data, a large filter needs no large im2col, taps that touch only padding are
skipped; negative inferred sizes, a bias of another shape and an empty filter are refused naming the node and the
field. Each graph goes through a file (saved, then graph_ir.loads) into graph_ir.Session. Their values:
tests/graph_ir/test_hostile_conv_values.py."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import ops
from tests.graph_ir.test_family_ops import PRODUCT
from tests.helpers.hostile_graphs import S1, MiB, ints, run_hostile
from tests.helpers.train_steps import scaled_difference

# -- 1. memory bombs: pads and windows cost only what touches the data ----------------------------------------------

BIG = 10**5


def test_huge_pads_around_one_element_cost_no_memory():
    """Pads of 1e5 around a 1x1 input with stride 1e5 (a 3x3 output): padding the input would take 149 GiB."""
    x, f, dy = np.full((1, 1, 1, 1), 3, np.float32), np.full((1, 1, 1, 1), 2, np.float32), \
        np.arange(1, 10, dtype=np.float32).reshape(1, 3, 3, 1)
    geometry = {"strides": [1, BIG, BIG, 1], "pads": [BIG] * 4}
    (y,), peak, _ = run_hostile(lambda x, f: ops.Conv2D(x, f, **geometry), [x, f])
    np.testing.assert_array_equal(y[0, :, :, 0], [[0, 0, 0], [0, 6, 0], [0, 0, 0]])
    (dx,), peak_dx, _ = run_hostile(lambda f, dy: ops.Conv2DBackpropInput(ints(1, 1, 1, 1), f, dy, **geometry), [f, dy])
    np.testing.assert_array_equal(dx, [[[[10]]]])  # only dy's centre reads the input
    (df,), peak_df, _ = run_hostile(lambda x, dy: ops.Conv2DBackpropFilter(x, ints(1, 1, 1, 1), dy, **geometry), [x, dy])
    np.testing.assert_array_equal(df, [[[[15]]]])
    assert max(peak, peak_dx, peak_df) < MiB, (peak, peak_dx, peak_df)


@pytest.mark.parametrize("op", ["MaxPool", "AvgPool", "MaxPoolGrad", "AvgPoolGrad"])
def test_a_huge_pooling_window_costs_no_memory_nor_time(op):
    """A 1e5 x 1e5 SAME window over a 2x3 input: padding it would take 37 GiB, and walking the window 1e10 steps."""
    x = np.array([[1, -2, 5], [0, 4, 4]], np.float32).reshape(1, 2, 3, 1)
    geometry = {"ksize": [1, BIG, BIG, 1], "strides": S1, "padding": "SAME"}
    dy = np.arange(6, dtype=np.float32).reshape(1, 2, 3, 1)
    if op == "MaxPool":  # every window covers all of x
        (y,), peak, seconds = run_hostile(lambda x: ops.MaxPool(x, **geometry), [x])
        np.testing.assert_array_equal(y, np.full_like(x, 5))
    elif op == "AvgPool":
        (y,), peak, seconds = run_hostile(lambda x: ops.AvgPool(x, **geometry), [x])
        np.testing.assert_allclose(y, np.full_like(x, 2), rtol=1e-6)
    elif op == "MaxPoolGrad":  # every window's gradient goes to the one 5
        (y,), peak, seconds = run_hostile(lambda x, dy: ops.MaxPoolGrad(x, ops.MaxPool(x, **geometry), dy, **geometry),
                                   [x, dy])
        np.testing.assert_array_equal(y.reshape(-1), [0, 0, 15, 0, 0, 0])
    else:  # every window's gradient is shared by all six elements
        (y,), peak, seconds = run_hostile(lambda dy: ops.AvgPoolGrad(ints(1, 2, 3, 1), dy, **geometry), [dy])
        np.testing.assert_allclose(y, np.full_like(x, 15 / 6), rtol=1e-6)
    assert peak < MiB and seconds < 1, (peak, seconds)


@pytest.mark.parametrize("op", ["Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput"])
def test_a_large_filter_needs_no_large_im2col(op):
    """[1, 64, 64, 64] by a [64, 64, 64, 1] filter (SAME): im2col's matrix would be 4 GiB for a 16 KiB output."""
    rng = np.random.default_rng(zlib.crc32(op.encode()))
    x, f = rng.standard_normal((1, 64, 64, 64)).astype(np.float32), rng.standard_normal((64, 64, 64, 1)).astype(
        np.float32)
    dy = rng.standard_normal((1, 64, 64, 1)).astype(np.float32)
    geometry = {"strides": S1, "pads": [31, 32, 31, 32]}
    tf_geometry = {"strides": S1, "padding": "SAME"}
    if op == "Conv2D":
        (got,), peak, _ = run_hostile(lambda x, f: ops.Conv2D(x, f, **geometry), [x, f])
        want = tf.nn.conv2d(x, f, **tf_geometry)
    elif op == "Conv2DBackpropFilter":
        (got,), peak, _ = run_hostile(lambda x, dy: ops.Conv2DBackpropFilter(x, ints(*f.shape), dy, **geometry), [x, dy])
        # TF's Conv2DBackpropFilter takes 10 s here; the same sums as a VALID conv2d of the padded x's channels
        # (as a batch) by dy: df[i, j, c, 0] = sum over (h, w) of x_padded[h + i, w + j, c] * dy[h, w].
        padded = np.pad(x, ((0, 0), (31, 32), (31, 32), (0, 0))).transpose(3, 1, 2, 0)
        want = tf.transpose(tf.nn.conv2d(padded, dy.transpose(1, 2, 0, 3), 1, "VALID"), (1, 2, 0, 3))
    else:
        (got,), peak, _ = run_hostile(lambda f, dy: ops.Conv2DBackpropInput(ints(*x.shape), f, dy, **geometry), [f, dy])
        want = tf.raw_ops.Conv2DBackpropInput(input_sizes=x.shape, filter=f, out_backprop=dy, **tf_geometry)
    assert scaled_difference(got, want.numpy()) <= PRODUCT
    assert peak < 3 * (x.nbytes + f.nbytes) + 64 * MiB, peak


# -- 2. time bombs: taps that touch only padding are skipped ----------------------------------------------------------

def test_a_window_of_a_million_taps_over_one_element_takes_no_time():
    """Conv2DBackpropInput of a one-element input by a 1000x1000 filter: one tap reads the input, not a million."""
    rng = np.random.default_rng(5)
    f = rng.standard_normal((1000, 1000, 1, 2)).astype(np.float32)
    dy = rng.standard_normal((1, 1, 1, 2)).astype(np.float32)
    (got,), _, seconds = run_hostile(lambda f, dy: ops.Conv2DBackpropInput(ints(1, 1, 1, 1), f, dy, strides=S1,
                                                                     pads=[500, 499, 500, 499]), [f, dy])
    want = tf.raw_ops.Conv2DBackpropInput(input_sizes=[1, 1, 1, 1], filter=f, out_backprop=dy, strides=S1,
                                          padding="EXPLICIT", explicit_paddings=[0, 0, 500, 499, 500, 499, 0, 0])
    assert scaled_difference(got, want.numpy()) <= PRODUCT
    assert seconds < 0.5, seconds


# -- 3. negative inferred sizes -------------------------------------------------------------------------------------

@pytest.mark.parametrize("op, field", [("Conv2DBackpropInput", "input_size"), ("Conv2DBackpropFilter", "filter_size"),
                                       ("AvgPoolGrad", "orig_input_shape")])
def test_negative_inferred_sizes_are_refused_naming_node_and_field(op, field):
    """-2**31 rows with pads of 2**31 fit the geometry, and would make a negative (so uncounted) output."""
    one = np.ones((1, 1, 1, 1), np.float32)
    graph = graph_ir.Graph("g")
    with graph, pytest.raises(graph_ir.GraphError, match=rf"'bad': {field} has shape \[1, -2147483648, 1, 1\].*>= 0"):
        if op == "Conv2DBackpropInput":
            ops.Conv2DBackpropInput(ints(1, -2**31, 1, 1), one, one, strides=S1, pads=[2**31, 0, 0, 0], name="bad")
        elif op == "Conv2DBackpropFilter":
            ops.Conv2DBackpropFilter(one, ints(1, -2**31, 1, 1), one, strides=S1, pads=[2**31, 0, 0, 0], name="bad")
        else:
            ops.AvgPoolGrad(ints(1, -2**31, 1, 1), np.ones((1, 0, 1, 1), np.float32), ksize=[1, 2, 2, 1],
                            strides=[1, 2**31, 1, 1], padding="SAME", name="bad")


# -- 4. Conv2D's bias and filter of another shape ------------------------------------------------------------------

def test_a_file_with_a_bias_of_another_shape_is_refused():
    graph = graph_ir.Graph("g")
    with graph:
        x, f = graph_ir.Data(0, "float32", (1, 4, 4, 3)), graph_ir.Data(1, "float32", (3, 3, 3, 5))
        bias = graph_ir.Data(2, "float32", (5,), name="bias")
        graph.set_outputs([ops.Conv2D(x, f, bias, strides=S1, pads=[1, 1, 1, 1], name="conv")])
    model = graph.to_model_def()
    next(op for op in model.graph[0].op if op.name == "bias").output_desc[0].shape.dim[0] = 3
    with pytest.raises(graph_ir.GraphError, match=r"Conv2D 'conv': input 'bias' must have shape \[5\] \(the filter's "
                                                  r"outputs\), got \[3\]"):
        graph_ir.loads(model.SerializeToString())


def test_a_bias_of_another_shape_and_offset_w_are_refused():
    x, f = np.ones((1, 4, 4, 3), np.float32), np.ones((3, 3, 3, 5), np.float32)
    graph = graph_ir.Graph("g")
    for bias in (np.ones(3, np.float32), np.ones((1, 5), np.float32), np.ones((), np.float32)):
        with graph, pytest.raises(graph_ir.GraphError, match=r"Conv2D 'c': input 'bias' must have shape \[5\]"):
            ops.Conv2D(x, f, bias, strides=S1, pads=[1, 1, 1, 1], name="c")
    with graph, pytest.raises(graph_ir.GraphError, match=r"Conv2D 'c': input 'offset_w'"):
        ops.Conv2D(x, f, None, np.zeros(5, np.int8), strides=S1, pads=[1, 1, 1, 1], name="c")


@pytest.mark.parametrize("f_shape", [(0, 3, 3, 4), (3, 0, 3, 4), (3, 3, 3, 0)])
def test_conv2d_with_an_empty_filter_is_refused_as_tensorflow_refuses_it(f_shape):
    with pytest.raises(tf.errors.InvalidArgumentError, match="filter must not have zero elements"):
        tf.nn.conv2d(np.ones((1, 5, 5, 3), np.float32), np.zeros(f_shape, np.float32), 1, "VALID")
    graph = graph_ir.Graph("g")
    with graph, pytest.raises(graph_ir.GraphError, match=r"Conv2D 'c': filter must be .* no zero dim, got \[" +
                              ", ".join(map(str, f_shape)) + r"\]"):
        ops.Conv2D(np.ones((1, 5, 5, 3), np.float32), np.zeros(f_shape, np.float32), strides=S1, pads=[0] * 4,
                   name="c")
