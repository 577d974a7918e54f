"""The depthwise executors' C++ path (graph_ir._binding's depthwise_*, graph_ir/cc/depthwise.h) called directly:
against TensorFlow (tf.nn.depthwise_conv2d's raw op and its two gradients) on fresh random inputs with zeros, ties,
odd sizes, strides 1 and 2, SAME and VALID, dilations (forward only: TF's CPU gradient kernels ignore them),
multipliers 1 and 3, float16 and bfloat16, NaN and inf, an empty batch, within 1e-5 of the output's scale (Eigen's
order against ours); bitwise the previous NumPy executors (kept as the float64 path) for the forward and input
gradient, the filter gradient within 2e-7 relative (both sum in float64 and round once), for any thread count;
hostile windows in time proportional to the data; malformed buffers refused with ValueError/TypeError."""

from __future__ import annotations

import time
import tracemalloc
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from graph_ir import _binding
from graph_ir.executors import depthwise as executors
from graph_ir.executors import threads
from tests.helpers.depthwise import depthwise_filter_grad, depthwise_forward, depthwise_input_grad, floats
from tests.helpers.train_steps import scaled_difference

# (x shape, filter shape, strides, padding, dilations)
GEOMETRIES = {
    "same-s1-m1": ((2, 7, 5, 3), (3, 3, 3, 1), (1, 1), "SAME", (1, 1)),
    "valid-s2-m3": ((2, 9, 8, 5), (3, 2, 5, 3), (2, 2), "VALID", (1, 1)),
    "same-s2-odd-m3": ((1, 7, 6, 3), (4, 3, 3, 3), (2, 2), "SAME", (1, 1)),
    "same-s21-m1": ((3, 8, 7, 9), (3, 3, 9, 1), (2, 1), "SAME", (1, 1)),
    "kernel-larger-than-input": ((1, 2, 3, 3), (5, 5, 3, 3), (1, 1), "SAME", (1, 1)),
    "empty-batch": ((0, 5, 5, 4), (3, 3, 4, 1), (2, 2), "SAME", (1, 1)),
    "dilated-same-m3": ((2, 8, 7, 3), (3, 3, 3, 3), (1, 1), "SAME", (2, 3)),
    "dilated-valid-s1": ((2, 9, 10, 4), (3, 2, 4, 1), (1, 1), "VALID", (2, 3)),
}
DILATED = [g for g in GEOMETRIES if g.startswith("dilated")]


def _pads(size: int, k: int, s: int, d: int, padding: str) -> tuple[int, int]:
    """TF's SAME (more after than before) or VALID pads of one axis."""
    if padding == "VALID":
        return 0, 0
    total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
    return total // 2, total - total // 2


def _node(x_shape, f_shape, strides, padding, dilations, out_shape, dtype=np.float32):
    (top, bottom), (left, right) = (_pads(x_shape[1 + a], f_shape[a], strides[a], dilations[a], padding)
                                    for a in range(2))
    attrs = {"strides": [1, *strides, 1], "dilations": [1, *dilations, 1], "pads": [top, bottom, left, right]}
    return SimpleNamespace(attrs=attrs, output_descs=[SimpleNamespace(shape=tuple(out_shape),
                                                                      dtype=SimpleNamespace(numpy=dtype))])


def _y_shape(x_shape, f_shape, strides, padding, dilations):
    """[N, Ho, Wo, C * M] by TF's SAME / VALID arithmetic (TF's kernels give an empty batch other sizes)."""
    spans = [(f_shape[a] - 1) * dilations[a] + 1 for a in range(2)]
    hw = [-(-x_shape[1 + a] // strides[a]) if padding == "SAME" else (x_shape[1 + a] - spans[a]) // strides[a] + 1
          for a in range(2)]
    return (x_shape[0], *hw, f_shape[2] * f_shape[3])


def _run(op: str, geometry, inputs, dtype=np.float32):
    """(ours, the previous NumPy executor's, TF's) for op on inputs ([x, f], [f, dy] or [x, dy])."""
    x_shape, f_shape, strides, padding, dilations = geometry
    y_shape = _y_shape(x_shape, f_shape, strides, padding, dilations)
    if op == "forward":
        node = _node(x_shape, f_shape, strides, padding, dilations, y_shape, dtype)
        ours, numpy_path, args = executors.EXECUTORS["DepthwiseConv2D"], executors._numpy_depthwise_conv2d, inputs
        tf_fn = depthwise_forward(strides, padding, dilations)
    elif op == "input":
        node = _node(x_shape, f_shape, strides, padding, dilations, x_shape, dtype)
        ours, numpy_path = executors.EXECUTORS["DepthwiseConv2DBackpropInput"], executors._numpy_backprop_input
        args = [None, *inputs]
        tf_fn = depthwise_input_grad(list(x_shape), strides, padding, dilations)
    else:
        node = _node(x_shape, f_shape, strides, padding, dilations, f_shape)
        ours, numpy_path = executors.EXECUTORS["DepthwiseConv2DBackpropFilter"], executors._numpy_backprop_filter
        args = [inputs[0], None, inputs[1]]
        tf_fn = depthwise_filter_grad(list(f_shape), strides, padding, dilations)
    want = tf_fn(*inputs).numpy() if 0 not in x_shape else None
    return ours(node, args)[0], numpy_path(node, args)[0], want


def _inputs(op: str, geometry, rng):
    x_shape, f_shape, strides, padding, dilations = geometry
    y_shape = _y_shape(x_shape, f_shape, strides, padding, dilations)
    shapes = {"forward": (x_shape, f_shape), "input": (f_shape, y_shape), "filter": (x_shape, y_shape)}[op]
    return [floats(rng, *s) for s in shapes]


def _assert_bitwise(got, want):
    """The same bits, NaN payloads aside (which operand's NaN an add returns depends on the compiler's operand
    order: both NaN)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(np.asarray(got, np.float32))
    np.testing.assert_array_equal(nan, np.isnan(np.asarray(want, np.float32)))
    assert np.array_equal(got[~nan].view(np.uint8), want[~nan].view(np.uint8))


@pytest.mark.parametrize("op", ["forward", "input", "filter"])
@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_against_tensorflow_and_the_numpy_path(op, name):
    if op != "forward" and name in DILATED:
        pytest.skip("TF's CPU gradient kernels ignore dilations (tests/graph_ir/test_depthwise_ops.py)")
    geometry = GEOMETRIES[name]
    rng = np.random.default_rng([hash(op) % 1000, len(name)])
    got, previous, want = _run(op, geometry, _inputs(op, geometry, rng))
    if op == "filter":
        np.testing.assert_allclose(got, previous, rtol=2e-7, atol=0)
    else:
        _assert_bitwise(got, previous)
    if want is not None:
        assert got.shape == want.shape and scaled_difference(got, want) <= 1e-5


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("op", ["forward", "input", "filter"])
def test_16_bit_inputs_are_computed_in_float32(op, dtype):
    geometry = GEOMETRIES["same-s2-odd-m3"]
    inputs = [a.astype(dtype) for a in _inputs(op, geometry, np.random.default_rng(7))]
    out_dtype = np.float32 if op == "filter" else dtype
    got, previous, want = _run(op, geometry, inputs, out_dtype)
    assert got.dtype == out_dtype
    if op == "filter":
        np.testing.assert_allclose(got, previous, rtol=2e-7, atol=0)
    else:
        _assert_bitwise(got, previous)
    # one rounding to the 16-bit type (TF's CPU kernels compute these in float32 too)
    assert scaled_difference(got, want) <= 2.0 ** -(8 if dtype == ml_dtypes.bfloat16 else 11) * 4


@pytest.mark.parametrize("op", ["forward", "input", "filter"])
def test_nan_and_inf_flow_and_padding_contributes_nothing(op):
    geometry = GEOMETRIES["same-s2-odd-m3"]
    inputs = _inputs(op, geometry, np.random.default_rng(11))
    inputs[0].reshape(-1)[3::11] = np.inf
    inputs[1].reshape(-1)[5::13] = -np.inf
    inputs[1].reshape(-1)[::17] = np.nan
    got, previous, want = _run(op, geometry, inputs)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    assert scaled_difference(got[finite], want[finite]) <= 1e-5
    if op != "filter":
        _assert_bitwise(got, previous)


def test_a_nan_filter_tap_meeting_only_padding_leaves_outputs_finite():
    geometry = ((1, 1, 1, 2), (3, 3, 2, 1), (1, 1), "SAME", (1, 1))
    x, f = np.ones((1, 1, 1, 2), np.float32), np.full((3, 3, 2, 1), np.nan, np.float32)
    f[1, 1] = 2.0  # the centre tap is the only one meeting x
    got, _, want = _run("forward", geometry, [x, f])
    np.testing.assert_array_equal(got, np.full((1, 1, 1, 2), 2.0, np.float32))
    np.testing.assert_array_equal(want, got)


# (channels, multiplier): the filter gradient splits C * M >= 128 (on 64-byte lines of df when C * M % 8 == 0)
@pytest.mark.parametrize("c, m", [(136, 1), (130, 1), (48, 3), (24, 9)])
@pytest.mark.parametrize("op", ["forward", "input", "filter"])
def test_the_result_does_not_depend_on_the_thread_count(op, c, m):
    geometry = ((4, 17, 15, c), (3, 3, c, m), (2, 1), "SAME", (1, 1))  # enough work for two threads
    inputs = _inputs(op, geometry, np.random.default_rng(c * m))
    results = []
    for count in (1, 2, 3):
        with threads.using(count):
            results.append(_run(op, geometry, inputs)[0])
    for other in results[1:]:
        _assert_bitwise(other, results[0])
    if op != "filter":  # M = 9: NumPy's pairwise sum over the multiplier (8 accumulators), matched bit for bit
        with threads.using(2):
            _assert_bitwise(results[0], _run(op, geometry, inputs)[1])


def _call(name, a, b, out, strides=(1, 1), dilations=(1, 1), pads=(0, 0, 0, 0)):
    getattr(_binding, name)(a, b, out, list(strides), list(dilations), list(pads), 2)


@pytest.mark.parametrize("dilation", [10**5, 2**31 - 1])
def test_a_huge_window_over_a_tiny_input_is_instant(dilation):
    x, f = np.full((1, 1, 1, 2), 3.0, np.float32), np.full((2, 2, 2, 1), 2.0, np.float32)
    pads = (dilation, 0, dilation, 0)  # the window's last tap meets x's only element
    start = time.perf_counter()
    for name, a, b, out in (("depthwise_forward", x, f, np.empty((1, 1, 1, 2), np.float32)),
                            ("depthwise_backprop_input", f, x, np.empty((1, 1, 1, 2), np.float32)),
                            ("depthwise_backprop_filter", x, x, np.empty((2, 2, 2, 1), np.float64))):
        _call(name, a, b, out, dilations=(dilation, dilation), pads=pads)
        assert np.isfinite(out).all()
    assert time.perf_counter() - start < 0.5


def test_the_workspace_states_the_16_bit_copies_and_float64_sums():
    geometry = ((2, 17, 15, 32), (3, 3, 32, 1), (2, 2), "SAME", (1, 1))
    y_shape = _y_shape(*geometry)
    desc = lambda shape, dtype: SimpleNamespace(shape=shape, num_elements=int(np.prod(shape)),
                                                dtype=SimpleNamespace(itemsize=np.dtype(dtype).itemsize))
    x, f = [a.astype(np.float16) for a in _inputs("forward", geometry, np.random.default_rng(3))]
    node = _node(*geometry[:2], *geometry[2:], y_shape, np.float16)
    node.inputs = [SimpleNamespace(desc=desc(x.shape, np.float16)), SimpleNamespace(desc=desc(f.shape, np.float16))]
    node.output_descs[0].num_elements = int(np.prod(y_shape))
    node.output_descs[0].dtype.itemsize = 2
    tracemalloc.start()
    y = executors.EXECUTORS["DepthwiseConv2D"](node, [x, f])[0]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak <= y.nbytes + executors.WORKSPACE["DepthwiseConv2D"](node) + 4096


@pytest.mark.parametrize("change, error", [
    (lambda a: {**a, "y": np.empty((1, 4, 4, 3), np.float32)}, "rows"),
    (lambda a: {**a, "y": np.empty((1, 5, 5, 2), np.float32)}, "C \\* M"),
    (lambda a: {**a, "x": np.empty((1, 5, 5, 3), np.float32)[:, ::-1]}, "C-contiguous"),
    (lambda a: {**a, "x": np.empty((5, 5, 3), np.float32)}, "4-D"),
    (lambda a: {**a, "strides": [0, 1]}, "strides"),
    (lambda a: {**a, "pads": [-1, 0, 0, 0]}, "pads"),
    (lambda a: {**a, "dilations": [1, 2**31]}, "dilations"),
    (lambda a: {**a, "y": a["x"][:, :5, :5]}, "share memory|C-contiguous|rows"),
])
def test_malformed_buffers_are_refused(change, error):
    x = np.zeros((1, 7, 7, 3), np.float32)
    args = {"x": x, "filter": np.zeros((3, 3, 3, 1), np.float32), "y": np.empty((1, 5, 5, 3), np.float32),
            "strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0], "threads": 2}
    with pytest.raises(ValueError, match=error):
        _binding.depthwise_forward(**change(args))


def test_wrong_dtypes_are_refused():
    x, f = np.zeros((1, 3, 3, 2), np.float64), np.zeros((1, 1, 2, 1), np.float32)
    with pytest.raises(TypeError, match="float32"):
        _call("depthwise_forward", x, f, np.empty((1, 3, 3, 2), np.float32))
    with pytest.raises(TypeError, match="float64"):
        _call("depthwise_backprop_filter", x.astype(np.float32), x.astype(np.float32),
              np.empty((1, 1, 2, 1), np.float32))
    with pytest.raises(ValueError, match="share memory"):
        y = np.zeros((1, 3, 3, 2), np.float32)
        _call("depthwise_forward", y, f, y)
