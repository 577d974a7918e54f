"""The conv family's executors against hostile graphs (issue 27), what they compute: Conv2D's bias over the channel
axis, NaN and inf meeting no padding, empty batches and channels, and both ways of the convolutions and the pools on
random geometries. Each graph goes through a file (saved, then graph_ir.loads) into graph_ir.Session, and is compared
with TensorFlow or with what padding that contributes nothing gives. What they cost and refuse:
tests/graph_ir/test_hostile_conv_memory.py."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import ops
from graph_ir.opset.conv import same_padding
from tests.graph_ir.test_family_ops import PRODUCT
from tests.helpers.hostile_graphs import S1, ints, run_hostile
from tests.helpers.train_steps import scaled_difference

# -- 1. Conv2D's bias ------------------------------------------------------------------------------------------------

def test_conv2d_adds_its_bias_over_the_channel_axis():
    rng = np.random.default_rng(4)
    x, f = rng.standard_normal((2, 7, 6, 3)).astype(np.float32), rng.standard_normal((3, 3, 3, 5)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    (got,), _, _ = run_hostile(lambda x, f, b: ops.Conv2D(x, f, b, strides=[1, 2, 1, 1], pads=[1, 1, 1, 1]), [x, f, bias])
    want = tf.nn.bias_add(tf.raw_ops.Conv2D(input=x, filter=f, strides=[1, 2, 1, 1], padding="EXPLICIT",
                                            explicit_paddings=[0, 0, 1, 1, 1, 1, 0, 0]), bias)
    assert scaled_difference(got, want.numpy()) <= PRODUCT


# -- 2. NaN and inf: padding contributes nothing ----------------------------------------------------------------------

def _with_specials(rng, shape, where: bool) -> np.ndarray:
    a = rng.standard_normal(shape).astype(np.float32)
    a.reshape(-1)[::5] = 0
    if where:
        flat = a.reshape(-1)
        flat[rng.integers(0, flat.size, 2)] = np.nan
        flat[rng.integers(0, flat.size, 2)] = np.inf
        flat[rng.integers(0, flat.size, 1)] = -np.inf
    return a


def _same_specials(got: np.ndarray, want: np.ndarray) -> None:
    """NaN where TF has NaN, the same infinities, and the finite values within PRODUCT."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.where(np.isinf(want), want, 0), np.where(np.isinf(got), got, 0))
    finite = np.isfinite(want)
    assert scaled_difference(got[finite], want[finite]) <= PRODUCT


GEOMETRIES = {  # name: (strides, dilations, x shape, filter shape), all SAME
    "s1": ([1, 1, 1, 1], [1, 1, 1, 1], (2, 6, 5, 3), (3, 3, 3, 4)),
    "s2-odd": ([1, 2, 2, 1], [1, 1, 1, 1], (1, 7, 6, 2), (4, 3, 2, 3)),
    "s2-uneven": ([1, 2, 3, 1], [1, 1, 1, 1], (2, 8, 9, 2), (3, 5, 2, 2)),
    "dilated": ([1, 1, 1, 1], [1, 2, 3, 1], (1, 6, 7, 2), (3, 3, 2, 2)),
}


SPECIALS = [("Conv2D", "x"), ("Conv2D", "filter"), ("Conv2DBackpropFilter", "x"), ("Conv2DBackpropFilter", "dy"),
            ("Conv2DBackpropInput", "filter"), ("Conv2DBackpropInput", "dy")]


@pytest.mark.parametrize("name", list(GEOMETRIES))
@pytest.mark.parametrize("op, special", SPECIALS)
def test_nan_and_inf_meet_no_padding_as_in_tensorflow(op, special, name):
    """TF's SAME padding contributes nothing, so a NaN or inf reaches only the outputs it really meets. (TF's
    EXPLICIT-padding filter gradient pads x with zeros instead, so there 0 * NaN shows; graph_ir follows SAME.)"""
    strides, dilations, x_shape, f_shape = GEOMETRIES[name]
    pads = []
    for axis in (1, 2):
        pads += same_padding(x_shape[axis], f_shape[axis - 1], strides[axis], dilations[axis])[1:]
    geometry = {"strides": strides, "pads": pads, "dilations": dilations}
    tf_geometry = {"strides": strides, "padding": "SAME", "dilations": dilations}
    rng = np.random.default_rng(zlib.crc32(f"{op}{name}{special}".encode()))
    x, f = _with_specials(rng, x_shape, special == "x"), _with_specials(rng, f_shape, special == "filter")
    y_shape = tf.raw_ops.Conv2D(input=x, filter=f, **tf_geometry).shape
    dy = _with_specials(rng, y_shape, special == "dy")
    if op == "Conv2D":
        (got,), _, _ = run_hostile(lambda x, f: ops.Conv2D(x, f, **geometry), [x, f])
        want = tf.raw_ops.Conv2D(input=x, filter=f, **tf_geometry)
    elif op == "Conv2DBackpropFilter":
        (got,), _, _ = run_hostile(lambda x, dy: ops.Conv2DBackpropFilter(x, ints(*f_shape), dy, **geometry), [x, dy])
        want = tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=f_shape, out_backprop=dy, **tf_geometry)
    else:
        (got,), _, _ = run_hostile(lambda f, dy: ops.Conv2DBackpropInput(ints(*x_shape), f, dy, **geometry), [f, dy])
        want = tf.raw_ops.Conv2DBackpropInput(input_sizes=x_shape, filter=f, out_backprop=dy, **tf_geometry)
    _same_specials(got, want.numpy())


# -- 3. empty tensors -------------------------------------------------------------------------------------------------

def test_empty_batches_and_channels_compute_what_tensorflow_computes():
    rng = np.random.default_rng(6)
    f = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    same = {"strides": S1, "pads": [1, 1, 1, 1]}
    (y,), _, _ = run_hostile(lambda x, f: ops.Conv2D(x, f, **same), [np.ones((0, 5, 5, 3), np.float32), f])
    assert y.shape == (0, 5, 5, 4)
    # An empty batch gives a zero filter gradient; an empty out_backprop channel axis a zero input gradient.
    x = np.ones((0, 5, 5, 3), np.float32)
    dy = np.ones((0, 5, 5, 4), np.float32)
    (df,), _, _ = run_hostile(lambda x, dy: ops.Conv2DBackpropFilter(x, ints(3, 3, 3, 4), dy, **same), [x, dy])
    want = tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=[3, 3, 3, 4], out_backprop=dy, strides=S1,
                                           padding="SAME")
    np.testing.assert_array_equal(df, want.numpy())
    f0, dy0 = np.ones((3, 3, 3, 0), np.float32), np.ones((1, 5, 5, 0), np.float32)
    (dx,), _, _ = run_hostile(lambda f, dy: ops.Conv2DBackpropInput(ints(1, 5, 5, 3), f, dy, **same), [f0, dy0])
    want = tf.raw_ops.Conv2DBackpropInput(input_sizes=[1, 5, 5, 3], filter=f0, out_backprop=dy0, strides=S1,
                                          padding="SAME")
    np.testing.assert_array_equal(dx, want.numpy())


@pytest.mark.parametrize("op", ["MaxPool", "AvgPool"])
def test_same_pooling_of_a_zero_height_input_is_empty_as_in_tensorflow(op):
    x = np.ones((1, 0, 5, 3), np.float32)
    (y,), _, _ = run_hostile(lambda x: getattr(ops, op)(x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME"), [x])
    want = getattr(tf.nn, {"MaxPool": "max_pool2d", "AvgPool": "avg_pool2d"}[op])(x, 2, 2, "SAME")
    assert y.shape == tuple(want.shape) == (1, 0, 3, 3)


def test_pool_gradients_of_an_empty_batch_are_empty():
    x, dy = np.ones((0, 4, 4, 3), np.float32), np.ones((0, 2, 2, 3), np.float32)
    geometry = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "SAME"}
    (got,), _, _ = run_hostile(lambda x, dy: ops.MaxPoolGrad(x, ops.MaxPool(x, **geometry), dy, **geometry), [x, dy])
    assert got.shape == (0, 4, 4, 3)
    (got,), _, _ = run_hostile(lambda dy: ops.AvgPoolGrad(ints(0, 4, 4, 3), dy, **geometry), [dy])
    assert got.shape == (0, 4, 4, 3)


# -- both ways of the convolutions, and the pools, on random geometries -----------------------------------------------

def _direct_sums(x, f, dy, strides, dilations, pads):
    """Conv2D, its filter gradient and its input gradient as direct float64 sums over (output, tap) pairs whose
    position lies inside x."""
    y = np.zeros((*dy.shape[:3], f.shape[3]))
    df, dx = np.zeros(f.shape), np.zeros(x.shape)
    for o in range(dy.shape[1]):
        for p in range(dy.shape[2]):
            for i in range(f.shape[0]):
                for j in range(f.shape[1]):
                    r, c = o * strides[1] + i * dilations[1] - pads[0], p * strides[2] + j * dilations[2] - pads[2]
                    if 0 <= r < x.shape[1] and 0 <= c < x.shape[2]:
                        y[:, o, p] += x[:, r, c] @ f[i, j]
                        df[i, j] += x[:, r, c].T @ dy[:, o, p]
                        dx[:, r, c] += dy[:, o, p] @ f[i, j].T
    return y, df, dx


@pytest.mark.parametrize("way", ["im2col", "per-tap"])
def test_both_ways_match_direct_sums_on_random_geometries(way, monkeypatch):
    """Strides, dilations and pads up to larger than the window, windows up to larger than x; tiny chunks, so blocks
    of rows are cut too."""
    from graph_ir.executors import im2col
    monkeypatch.setattr(im2col, "CHUNK_BYTES", 512)
    if way == "per-tap":
        monkeypatch.setattr(im2col, "fits", lambda *args: False)
    rng = np.random.default_rng(zlib.crc32(way.encode()))
    checked = 0
    while checked < 40:
        n, h, w, c, o = (int(v) for v in rng.integers(1, [3, 7, 7, 4, 4]))
        kh, kw, sh, sw, dh, dw = (int(v) for v in rng.integers(1, [5, 5, 5, 5, 4, 4]))
        pads = [int(v) for v in rng.integers(0, 7, 4)]
        if h + pads[0] + pads[1] < (kh - 1) * dh + 1 or w + pads[2] + pads[3] < (kw - 1) * dw + 1:
            continue
        geometry = {"strides": [1, sh, sw, 1], "dilations": [1, dh, dw, 1], "pads": pads}
        x, f = rng.standard_normal((n, h, w, c)).astype(np.float32), rng.standard_normal((kh, kw, c, o)).astype(
            np.float32)
        graph = graph_ir.Graph("g")
        with graph:
            y = ops.Conv2D(graph_ir.Data(0, "float32", x.shape), graph_ir.Data(1, "float32", f.shape), **geometry)
            dy = rng.standard_normal(y.desc.shape).astype(np.float32)
            hdy = graph_ir.Data(2, "float32", dy.shape)
            df = ops.Conv2DBackpropFilter(y.node.inputs[0], ints(*f.shape), hdy, **geometry)
            dx = ops.Conv2DBackpropInput(ints(*x.shape), y.node.inputs[1], hdy, **geometry)
            graph.set_outputs([y, df, dx])
        session = graph_ir.Session()
        session.add_graph(0, graph)
        for got, want in zip(session.run_graph(0, [x, f, dy]), _direct_sums(x, f, dy, geometry["strides"],
                                                                             geometry["dilations"], pads)):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        checked += 1


def _tf_pools(x: np.ndarray, dy: np.ndarray, geometry: dict) -> list[np.ndarray]:
    """TF's MaxPool, AvgPool, MaxPoolGrad and AvgPoolGrad in a tf.function (TF's CPU rules for NaN in max pooling)."""

    @tf.function
    def pools(x, dy):
        y = tf.raw_ops.MaxPool(input=x, **geometry)
        return (y, tf.raw_ops.AvgPool(value=x, **geometry),
                tf.raw_ops.MaxPoolGrad(orig_input=x, orig_output=y, grad=dy, **geometry),
                tf.raw_ops.AvgPoolGrad(orig_input_shape=x.shape, grad=dy, **geometry))

    return [t.numpy() for t in pools(x, dy)]


def test_pools_match_tensorflow_on_random_geometries():
    """Windows and strides up to larger than x, SAME and VALID, with NaN, +-inf and ties: max pooling and its
    gradient bitwise, average pooling and its gradient within rounding."""
    rng = np.random.default_rng(27)
    checked = 0
    while checked < 20:
        n, h, w, c = (int(v) for v in rng.integers(1, [3, 8, 8, 3]))
        ksize = [1, *(int(v) for v in rng.integers(1, 6, 2)), 1]
        strides = [1, *(int(v) for v in rng.integers(1, 5, 2)), 1]
        padding = ("SAME", "VALID")[checked % 2]
        if padding == "VALID" and (ksize[1] > h or ksize[2] > w):
            continue
        x = np.round(rng.standard_normal((n, h, w, c)) * 2).astype(np.float32)
        for value, step in ((np.nan, 7), (np.inf, 11), (-np.inf, 5)):
            x.reshape(-1)[rng.integers(0, x.size, max(1, x.size // step))] = value
        geometry = {"ksize": ksize, "strides": strides, "padding": padding}
        graph = graph_ir.Graph("g")
        with graph:
            hx = graph_ir.Data(0, "float32", x.shape)
            y = ops.MaxPool(hx, **geometry)
            dy = rng.integers(-8, 9, y.desc.shape).astype(np.float32)
            hdy = graph_ir.Data(1, "float32", dy.shape)
            graph.set_outputs([y, ops.AvgPool(hx, **geometry), ops.MaxPoolGrad(hx, y, hdy, **geometry),
                               ops.AvgPoolGrad(ints(*x.shape), hdy, **geometry)])
        session = graph_ir.Session()
        session.add_graph(0, graph)
        got, want = session.run_graph(0, [x, dy]), _tf_pools(x, dy, geometry)
        for k, (g, t) in enumerate(zip(got, want)):
            if k in (0, 2):
                np.testing.assert_array_equal(g, t)
            else:
                np.testing.assert_allclose(g, t, rtol=1e-6, atol=1e-6)
        checked += 1
