"""The conv family's executors against hostile graphs (issue 27): huge pads and windows, large filters, negative
inferred sizes, NaN and inf, empty tensors. Each graph goes through a file (saved, then graph_ir.loads) into
graph_ir.Session, and is compared with TensorFlow or with what padding that contributes nothing gives."""

from __future__ import annotations

import time
import tracemalloc
import zlib

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import ops
from graph_ir.opset.conv import same_padding
from tests.graph_ir.test_family_ops import PRODUCT
from tests.helpers.train_steps import scaled_difference

MiB = 2**20
S1 = [1, 1, 1, 1]


def _run(build, inputs, *, via_file: bool = True) -> tuple[list[np.ndarray], int, float]:
    """Builds build(*Data handles), saves and loads it, runs it in a Session: (outputs, the bytes the run allocated
    at its peak, seconds)."""
    graph = graph_ir.Graph("hostile")
    with graph:
        out = build(*[graph_ir.Data(k, str(a.dtype), a.shape, name=f"in{k}") for k, a in enumerate(inputs)])
        graph.set_outputs(list(out) if isinstance(out, (list, tuple)) else [out])
    if via_file:
        graph = graph_ir.loads(graph.to_model_def().SerializeToString())
    session = graph_ir.Session()
    session.add_graph(0, graph)
    tracemalloc.start()
    try:
        start = time.perf_counter()
        outputs = session.run_graph(0, list(inputs))
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return outputs, peak, seconds


def _ints(*values) -> np.ndarray:
    return np.array(values, np.int32)


# -- 1. memory bombs: pads and windows cost only what touches the data ----------------------------------------------

BIG = 10**5


def test_huge_pads_around_one_element_cost_no_memory():
    """Pads of 1e5 around a 1x1 input with stride 1e5 (a 3x3 output): padding the input would take 149 GiB."""
    x, f, dy = np.full((1, 1, 1, 1), 3, np.float32), np.full((1, 1, 1, 1), 2, np.float32), \
        np.arange(1, 10, dtype=np.float32).reshape(1, 3, 3, 1)
    geometry = {"strides": [1, BIG, BIG, 1], "pads": [BIG] * 4}
    (y,), peak, _ = _run(lambda x, f: ops.Conv2D(x, f, **geometry), [x, f])
    np.testing.assert_array_equal(y[0, :, :, 0], [[0, 0, 0], [0, 6, 0], [0, 0, 0]])
    (dx,), peak_dx, _ = _run(lambda f, dy: ops.Conv2DBackpropInput(_ints(1, 1, 1, 1), f, dy, **geometry), [f, dy])
    np.testing.assert_array_equal(dx, [[[[10]]]])  # only dy's centre reads the input
    (df,), peak_df, _ = _run(lambda x, dy: ops.Conv2DBackpropFilter(x, _ints(1, 1, 1, 1), dy, **geometry), [x, dy])
    np.testing.assert_array_equal(df, [[[[15]]]])
    assert max(peak, peak_dx, peak_df) < MiB, (peak, peak_dx, peak_df)


@pytest.mark.parametrize("op", ["MaxPool", "AvgPool", "MaxPoolGrad", "AvgPoolGrad"])
def test_a_huge_pooling_window_costs_no_memory_nor_time(op):
    """A 1e5 x 1e5 SAME window over a 2x3 input: padding it would take 37 GiB, and walking the window 1e10 steps."""
    x = np.array([[1, -2, 5], [0, 4, 4]], np.float32).reshape(1, 2, 3, 1)
    geometry = {"ksize": [1, BIG, BIG, 1], "strides": S1, "padding": "SAME"}
    dy = np.arange(6, dtype=np.float32).reshape(1, 2, 3, 1)
    if op == "MaxPool":  # every window covers all of x
        (y,), peak, seconds = _run(lambda x: ops.MaxPool(x, **geometry), [x])
        np.testing.assert_array_equal(y, np.full_like(x, 5))
    elif op == "AvgPool":
        (y,), peak, seconds = _run(lambda x: ops.AvgPool(x, **geometry), [x])
        np.testing.assert_allclose(y, np.full_like(x, 2), rtol=1e-6)
    elif op == "MaxPoolGrad":  # every window's gradient goes to the one 5
        (y,), peak, seconds = _run(lambda x, dy: ops.MaxPoolGrad(x, ops.MaxPool(x, **geometry), dy, **geometry),
                                   [x, dy])
        np.testing.assert_array_equal(y.reshape(-1), [0, 0, 15, 0, 0, 0])
    else:  # every window's gradient is shared by all six elements
        (y,), peak, seconds = _run(lambda dy: ops.AvgPoolGrad(_ints(1, 2, 3, 1), dy, **geometry), [dy])
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
        (got,), peak, _ = _run(lambda x, f: ops.Conv2D(x, f, **geometry), [x, f])
        want = tf.nn.conv2d(x, f, **tf_geometry)
    elif op == "Conv2DBackpropFilter":
        (got,), peak, _ = _run(lambda x, dy: ops.Conv2DBackpropFilter(x, _ints(*f.shape), dy, **geometry), [x, dy])
        # TF's Conv2DBackpropFilter takes 10 s here; the same sums as a VALID conv2d of the padded x's channels
        # (as a batch) by dy: df[i, j, c, 0] = sum over (h, w) of x_padded[h + i, w + j, c] * dy[h, w].
        padded = np.pad(x, ((0, 0), (31, 32), (31, 32), (0, 0))).transpose(3, 1, 2, 0)
        want = tf.transpose(tf.nn.conv2d(padded, dy.transpose(1, 2, 0, 3), 1, "VALID"), (1, 2, 0, 3))
    else:
        (got,), peak, _ = _run(lambda f, dy: ops.Conv2DBackpropInput(_ints(*x.shape), f, dy, **geometry), [f, dy])
        want = tf.raw_ops.Conv2DBackpropInput(input_sizes=x.shape, filter=f, out_backprop=dy, **tf_geometry)
    assert scaled_difference(got, want.numpy()) <= PRODUCT
    assert peak < 3 * (x.nbytes + f.nbytes) + 64 * MiB, peak


# -- 2. time bombs: taps that touch only padding are skipped ----------------------------------------------------------


def test_a_window_of_a_million_taps_over_one_element_takes_no_time():
    """Conv2DBackpropInput of a one-element input by a 1000x1000 filter: one tap reads the input, not a million."""
    rng = np.random.default_rng(5)
    f = rng.standard_normal((1000, 1000, 1, 2)).astype(np.float32)
    dy = rng.standard_normal((1, 1, 1, 2)).astype(np.float32)
    (got,), _, seconds = _run(lambda f, dy: ops.Conv2DBackpropInput(_ints(1, 1, 1, 1), f, dy, strides=S1,
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
            ops.Conv2DBackpropInput(_ints(1, -2**31, 1, 1), one, one, strides=S1, pads=[2**31, 0, 0, 0], name="bad")
        elif op == "Conv2DBackpropFilter":
            ops.Conv2DBackpropFilter(one, _ints(1, -2**31, 1, 1), one, strides=S1, pads=[2**31, 0, 0, 0], name="bad")
        else:
            ops.AvgPoolGrad(_ints(1, -2**31, 1, 1), np.ones((1, 0, 1, 1), np.float32), ksize=[1, 2, 2, 1],
                            strides=[1, 2**31, 1, 1], padding="SAME", name="bad")


# -- 4. Conv2D's bias ------------------------------------------------------------------------------------------------


def test_conv2d_adds_its_bias_over_the_channel_axis():
    rng = np.random.default_rng(4)
    x, f = rng.standard_normal((2, 7, 6, 3)).astype(np.float32), rng.standard_normal((3, 3, 3, 5)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    (got,), _, _ = _run(lambda x, f, b: ops.Conv2D(x, f, b, strides=[1, 2, 1, 1], pads=[1, 1, 1, 1]), [x, f, bias])
    want = tf.nn.bias_add(tf.raw_ops.Conv2D(input=x, filter=f, strides=[1, 2, 1, 1], padding="EXPLICIT",
                                            explicit_paddings=[0, 0, 1, 1, 1, 1, 0, 0]), bias)
    assert scaled_difference(got, want.numpy()) <= PRODUCT


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


# -- 5. NaN and inf: padding contributes nothing ----------------------------------------------------------------------


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
        (got,), _, _ = _run(lambda x, f: ops.Conv2D(x, f, **geometry), [x, f])
        want = tf.raw_ops.Conv2D(input=x, filter=f, **tf_geometry)
    elif op == "Conv2DBackpropFilter":
        (got,), _, _ = _run(lambda x, dy: ops.Conv2DBackpropFilter(x, _ints(*f_shape), dy, **geometry), [x, dy])
        want = tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=f_shape, out_backprop=dy, **tf_geometry)
    else:
        (got,), _, _ = _run(lambda f, dy: ops.Conv2DBackpropInput(_ints(*x_shape), f, dy, **geometry), [f, dy])
        want = tf.raw_ops.Conv2DBackpropInput(input_sizes=x_shape, filter=f, out_backprop=dy, **tf_geometry)
    _same_specials(got, want.numpy())


# -- 6. empty tensors -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("f_shape", [(0, 3, 3, 4), (3, 0, 3, 4), (3, 3, 3, 0)])
def test_conv2d_with_an_empty_filter_is_refused_as_tensorflow_refuses_it(f_shape):
    with pytest.raises(tf.errors.InvalidArgumentError, match="filter must not have zero elements"):
        tf.nn.conv2d(np.ones((1, 5, 5, 3), np.float32), np.zeros(f_shape, np.float32), 1, "VALID")
    graph = graph_ir.Graph("g")
    with graph, pytest.raises(graph_ir.GraphError, match=r"Conv2D 'c': filter must be .* no zero dim, got \[" +
                              ", ".join(map(str, f_shape)) + r"\]"):
        ops.Conv2D(np.ones((1, 5, 5, 3), np.float32), np.zeros(f_shape, np.float32), strides=S1, pads=[0] * 4,
                   name="c")


def test_empty_batches_and_channels_compute_what_tensorflow_computes():
    rng = np.random.default_rng(6)
    f = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    same = {"strides": S1, "pads": [1, 1, 1, 1]}
    (y,), _, _ = _run(lambda x, f: ops.Conv2D(x, f, **same), [np.ones((0, 5, 5, 3), np.float32), f])
    assert y.shape == (0, 5, 5, 4)
    # An empty batch gives a zero filter gradient; an empty out_backprop channel axis a zero input gradient.
    x = np.ones((0, 5, 5, 3), np.float32)
    dy = np.ones((0, 5, 5, 4), np.float32)
    (df,), _, _ = _run(lambda x, dy: ops.Conv2DBackpropFilter(x, _ints(3, 3, 3, 4), dy, **same), [x, dy])
    want = tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=[3, 3, 3, 4], out_backprop=dy, strides=S1,
                                           padding="SAME")
    np.testing.assert_array_equal(df, want.numpy())
    f0, dy0 = np.ones((3, 3, 3, 0), np.float32), np.ones((1, 5, 5, 0), np.float32)
    (dx,), _, _ = _run(lambda f, dy: ops.Conv2DBackpropInput(_ints(1, 5, 5, 3), f, dy, **same), [f0, dy0])
    want = tf.raw_ops.Conv2DBackpropInput(input_sizes=[1, 5, 5, 3], filter=f0, out_backprop=dy0, strides=S1,
                                          padding="SAME")
    np.testing.assert_array_equal(dx, want.numpy())


@pytest.mark.parametrize("op", ["MaxPool", "AvgPool"])
def test_same_pooling_of_a_zero_height_input_is_empty_as_in_tensorflow(op):
    x = np.ones((1, 0, 5, 3), np.float32)
    (y,), _, _ = _run(lambda x: getattr(ops, op)(x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME"), [x])
    want = getattr(tf.nn, {"MaxPool": "max_pool2d", "AvgPool": "avg_pool2d"}[op])(x, 2, 2, "SAME")
    assert y.shape == tuple(want.shape) == (1, 0, 3, 3)


def test_pool_gradients_of_an_empty_batch_are_empty():
    x, dy = np.ones((0, 4, 4, 3), np.float32), np.ones((0, 2, 2, 3), np.float32)
    geometry = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "SAME"}
    (got,), _, _ = _run(lambda x, dy: ops.MaxPoolGrad(x, ops.MaxPool(x, **geometry), dy, **geometry), [x, dy])
    assert got.shape == (0, 4, 4, 3)
    (got,), _, _ = _run(lambda dy: ops.AvgPoolGrad(_ints(0, 4, 4, 3), dy, **geometry), [dy])
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
    from graph_ir.executors import conv
    monkeypatch.setattr(conv, "CHUNK_BYTES", 512)
    if way == "per-tap":
        monkeypatch.setattr(conv, "_im2col_fits", lambda *args: False)
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
            df = ops.Conv2DBackpropFilter(y.node.inputs[0], _ints(*f.shape), hdy, **geometry)
            dx = ops.Conv2DBackpropInput(_ints(*x.shape), y.node.inputs[1], hdy, **geometry)
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
                               ops.AvgPoolGrad(_ints(*x.shape), hdy, **geometry)])
        session = graph_ir.Session()
        session.add_graph(0, graph)
        got, want = session.run_graph(0, [x, dy]), _tf_pools(x, dy, geometry)
        for k, (g, t) in enumerate(zip(got, want)):
            if k in (0, 2):
                np.testing.assert_array_equal(g, t)
            else:
                np.testing.assert_allclose(g, t, rtol=1e-6, atol=1e-6)
        checked += 1
