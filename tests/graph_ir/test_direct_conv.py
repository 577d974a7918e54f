"""graph_ir._binding's direct convolutions (graph_ir/cc/direct_conv.h, direct_conv_filter.h) against a float64
reference that, like TF's kernels with SAME padding, sums only the taps that read inside x; the same bits for any
thread count; what they refuse; and the executors that use them against TF."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from graph_ir import _binding
from graph_ir.executors import direct_conv
from tests.graph_ir.test_family_ops import PRODUCT
from tests.helpers.train_steps import scaled_difference

pytestmark = pytest.mark.skipif(not _binding.conv2d_direct_supported(), reason="the direct way needs AVX-512")
EPS32 = float(np.finfo(np.float32).eps)

# (x shape, filter taps, out channels, strides, dilations, pads (top, bottom, left, right))
GEOMETRIES = [
    ((2, 7, 9, 5), (3, 3), 3, (1, 1), (1, 1), (1, 1, 1, 1)),
    ((2, 10, 13, 17), (3, 3), 70, (2, 2), (1, 1), (0, 1, 0, 1)),
    ((1, 6, 20, 8), (5, 5), 33, (1, 2), (2, 1), (4, 4, 2, 3)),
    ((3, 5, 5, 16), (1, 1), 16, (1, 1), (1, 1), (0, 0, 0, 0)),
    ((2, 12, 30, 20), (3, 3), 130, (1, 1), (1, 1), (1, 1, 1, 1)),
    ((1, 4, 4, 3), (7, 7), 7, (1, 1), (1, 1), (3, 3, 3, 3)),
    ((1, 3, 2, 1), (9, 9), 1, (1, 1), (1, 1), (4, 4, 4, 4)),  # every output's window mostly padding
    ((2, 9, 11, 64), (3, 2), 64, (3, 1), (1, 2), (2, 0, 1, 1)),
]


def _out_hw(x_shape, taps, strides, dilations, pads):
    return tuple((x_shape[1 + k] + pads[2 * k] + pads[2 * k + 1] - ((taps[k] - 1) * dilations[k] + 1)) //
                 strides[k] + 1 for k in range(2))


def _valid(size, out, tap, stride, dilation, pad):
    """(outputs, inputs): the output indices whose tap reads inside [0, size), and the input index each reads."""
    o = np.arange(out)
    at = o * stride + tap * dilation - pad
    keep = (at >= 0) & (at < size)
    return o[keep], at[keep]


def _taps(x_shape, taps, out_hw, strides, dilations, pads):
    for i in range(taps[0]):
        rows = _valid(x_shape[1], out_hw[0], i, strides[0], dilations[0], pads[0])
        for j in range(taps[1]):
            cols = _valid(x_shape[2], out_hw[1], j, strides[1], dilations[1], pads[2])
            if rows[0].size and cols[0].size:
                yield i, j, np.ix_(rows[0], cols[0]), np.ix_(rows[1], cols[1])


def _reference(x, f, strides, dilations, pads):
    """float64 y and the bound of a float32 sum's rounding: each valid tap's product, padding never read."""
    out_hw = _out_hw(x.shape, f.shape[:2], strides, dilations, pads)
    y = np.zeros((x.shape[0], *out_hw, f.shape[3]))
    scale = np.zeros_like(y)
    with np.errstate(all="ignore"):
        for i, j, (oy, ox), (iy, ix) in _taps(x.shape, f.shape[:2], out_hw, strides, dilations, pads):
            y[:, oy, ox] += x[:, iy, ix].astype(np.float64) @ f[i, j].astype(np.float64)
            scale[:, oy, ox] += np.abs(x[:, iy, ix].astype(np.float64)) @ np.abs(f[i, j].astype(np.float64))
    return y, scale * f.shape[0] * f.shape[1] * f.shape[2] * EPS32


def _filter_reference(x, dy, taps, strides, dilations, pads):
    df = np.zeros((*taps, x.shape[3], dy.shape[3]))
    scale = np.zeros_like(df)
    with np.errstate(all="ignore"):
        for i, j, (oy, ox), (iy, ix) in _taps(x.shape, taps, dy.shape[1:3], strides, dilations, pads):
            xs, ds = x[:, iy, ix].reshape(-1, x.shape[3]).astype(np.float64), dy[:, oy, ox].reshape(-1, dy.shape[3])
            df[i, j] = xs.T @ ds
            scale[i, j] = np.abs(xs).T @ np.abs(ds.astype(np.float64))
    return df, scale * dy.shape[0] * dy.shape[1] * dy.shape[2] * EPS32


def _values(rng, shape):
    v = np.round(rng.standard_normal(shape) * 4) / 4  # ties
    v[rng.random(shape) < 0.1] = 0
    return v.astype(np.float32)


def _forward(x, f, y_shape, strides, dilations, pads, threads, flipped=False, finite=True):
    y = np.full(y_shape, np.nan, np.float32)
    _binding.conv2d_direct(x, f, y, list(strides), list(dilations), list(pads), flipped, finite, threads)
    return y


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=range(len(GEOMETRIES)))
def test_forward_is_within_a_float32_sums_rounding_and_the_same_for_any_thread_count(geometry):
    x_shape, taps, out, strides, dilations, pads = geometry
    rng = np.random.default_rng(sum(x_shape) + out)
    x, f = _values(rng, x_shape), _values(rng, (*taps, x_shape[3], out))
    want, bound = _reference(x, f, strides, dilations, pads)
    y = _forward(x, f, want.shape, strides, dilations, pads, 2)
    assert (np.abs(y - want) <= bound + 1e-30).all()
    for threads in (1, 3):
        np.testing.assert_array_equal(_forward(x, f, want.shape, strides, dilations, pads, threads), y)
    np.testing.assert_array_equal(_forward(x, f, want.shape, strides, dilations, pads, 2, finite=False), y)
    flipped = np.ascontiguousarray(f[::-1, ::-1].transpose(0, 1, 3, 2))  # read flipped, it is f again
    np.testing.assert_array_equal(_forward(x, flipped, want.shape, strides, dilations, pads, 2, flipped=True), y)


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=range(len(GEOMETRIES)))
def test_filter_gradient_is_within_a_float32_sums_rounding_and_the_same_for_any_thread_count(geometry):
    x_shape, taps, out, strides, dilations, pads = geometry
    rng = np.random.default_rng(sum(x_shape) * out)
    x = _values(rng, x_shape)
    dy = _values(rng, (x_shape[0], *_out_hw(x_shape, taps, strides, dilations, pads), out))
    want, bound = _filter_reference(x, dy, taps, strides, dilations, pads)
    got = []
    for threads in (1, 2, 3):
        df = np.full(want.shape, np.nan, np.float32)
        _binding.conv2d_direct_filter(x, dy, df, list(strides), list(dilations), list(pads), threads)
        got.append(df)
    assert (np.abs(got[1] - want) <= bound + 1e-30).all()
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[2], got[1])


def test_nan_and_inf_meet_only_what_a_valid_tap_reads():
    rng = np.random.default_rng(3)
    strides, dilations, pads = (1, 1), (1, 1), (1, 1, 1, 1)
    x, f = _values(rng, (2, 16, 15, 6)), _values(rng, (3, 3, 6, 20))
    x[0, 0, 0, 2], x[1, 7, 7, 0] = np.nan, np.inf
    f[0, 0, 1, 3], f[2, 1, 4, 5] = np.inf, np.nan  # taps that border outputs read only as padding
    want, _ = _reference(x, f, strides, dilations, pads)
    y = _forward(x, f, want.shape, strides, dilations, pads, 2, finite=False)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(y), np.isinf(want))
    assert np.isfinite(want).any() and not np.isfinite(want).all()
    dy = _values(rng, want.shape)
    dy[0, 0, 0, 1] = np.nan
    wdf, _ = _filter_reference(x, dy, (3, 3), strides, dilations, pads)
    df = np.empty(wdf.shape, np.float32)
    _binding.conv2d_direct_filter(x, dy, df, list(strides), list(dilations), list(pads), 2)
    np.testing.assert_array_equal(np.isnan(df), np.isnan(wdf))
    assert np.isfinite(wdf).any() and not np.isfinite(wdf).all()


def test_empty_batches_channels_and_outputs():
    args = ([1, 1], [1, 1], [1, 1, 1, 1])
    y = np.full((2, 4, 4, 3), np.nan, np.float32)
    _binding.conv2d_direct(np.zeros((2, 4, 4, 0), np.float32), np.zeros((3, 3, 0, 3), np.float32), y, *args, False,
                           True, 2)
    np.testing.assert_array_equal(y, 0)  # sums of nothing
    for x_shape, f_shape, y_shape in [((0, 4, 4, 2), (3, 3, 2, 3), (0, 4, 4, 3)), ((1, 4, 4, 2), (3, 3, 2, 0),
                                                                                      (1, 4, 4, 0))]:
        _binding.conv2d_direct(np.ones(x_shape, np.float32), np.ones(f_shape, np.float32),
                               np.empty(y_shape, np.float32), *args, False, True, 2)
    df = np.full((3, 3, 2, 3), np.nan, np.float32)
    _binding.conv2d_direct_filter(np.ones((0, 4, 4, 2), np.float32), np.ones((0, 4, 4, 3), np.float32), df, *args, 2)
    np.testing.assert_array_equal(df, 0)


@pytest.mark.parametrize("case", ["float64 x", "transposed x", "y too small", "y overlaps x", "channels differ",
                                  "negative pad", "zero stride", "3-D filter", "read-only y"])
def test_what_it_refuses_names_the_argument_and_writes_nothing(case):
    x, f = np.ones((1, 6, 6, 4), np.float32), np.ones((3, 3, 4, 5), np.float32)
    y = np.full((1, 6, 6, 5), 7, np.float32)
    strides, pads = [1, 1], [1, 1, 1, 1]
    if case == "float64 x":
        x = x.astype(np.float64)
    elif case == "transposed x":
        x = np.ones((1, 6, 4, 6), np.float32).transpose(0, 1, 3, 2)
    elif case == "y too small":
        y = np.full((1, 5, 6, 5), 7, np.float32)
    elif case == "y overlaps x":
        x = np.ones((1, 6, 6, 5), np.float32)
        f, y = np.ones((3, 3, 5, 5), np.float32), x
    elif case == "channels differ":
        f = np.ones((3, 3, 3, 5), np.float32)
    elif case == "negative pad":
        pads = [-1, 1, 1, 1]
    elif case == "zero stride":
        strides = [0, 1]
    elif case == "3-D filter":
        f = np.ones((3, 4, 5), np.float32)
    elif case == "read-only y":
        y.flags.writeable = False
    before = y.copy()
    with pytest.raises((ValueError, TypeError)) as raised:
        _binding.conv2d_direct(x, f, y, strides, [1, 1], pads, False, True, 2)
    assert any(word in str(raised.value) for word in ("x", "filter", "y", "pads", "strides")), raised.value
    np.testing.assert_array_equal(y, before)


@pytest.mark.parametrize("op", ["Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"])
def test_the_executors_that_take_it_match_tensorflow_with_a_non_finite_filter(op):
    """Big enough for the direct way (direct_conv.fits); a NaN filter tap that border outputs meet only as padding."""
    rng = np.random.default_rng(11)
    x, f = _values(rng, (2, 16, 16, 8)), _values(rng, (3, 3, 8, 16))
    f[0, 0, 2, 3] = np.nan
    dy = _values(rng, (2, 16, 16, 16))
    dy[1, 0, 0, 4] = np.inf
    attrs = {"strides": [1] * 4, "dilations": [1] * 4, "pads": [1] * 4}
    assert direct_conv.fits(attrs, x.shape, f.shape, dy.shape) and direct_conv.filter_fits(attrs, x.shape, f.shape,
                                                                                             dy.shape)
    import graph_ir
    step = {"Conv2D": lambda x, f: tf.nn.conv2d(x, f, 1, "SAME"),
            "Conv2DBackpropInput": lambda f, dy: tf.raw_ops.Conv2DBackpropInput(
                input_sizes=x.shape, filter=f, out_backprop=dy, strides=[1] * 4, padding="SAME"),
            "Conv2DBackpropFilter": lambda x, dy: tf.raw_ops.Conv2DBackpropFilter(
                input=x, filter_sizes=f.shape, out_backprop=dy, strides=[1] * 4, padding="SAME")}[op]
    inputs = {"Conv2D": [x, f], "Conv2DBackpropInput": [f, dy], "Conv2DBackpropFilter": [x, dy]}[op]
    fn = tf.function(step)
    graph = graph_ir.from_tensorflow(fn, *[tf.TensorSpec(a.shape, tf.float32) for a in inputs])
    session = graph_ir.Session()
    session.add_graph(0, graph)
    (got,) = session.run_graph(0, inputs)
    want = fn(*inputs).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    assert scaled_difference(got[finite], want[finite]) <= PRODUCT
