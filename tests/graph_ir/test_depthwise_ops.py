"""The depthwise family's TF ops (graph_ir/lowering/ops/depthwise.py), each alone in a tf.function: lowered, run in
graph_ir.Session and compared with TensorFlow (tf.raw_ops.DepthwiseConv2dNative and its two gradients) on fresh
random inputs with zeros, negatives and ties, odd sizes, strides 1 and 2, SAME, VALID and EXPLICIT padding,
dilations, channel multipliers 1 and 2, within 1e-5 of the output's scale (products and sums: NumPy's order against
Eigen's; measured at most 1.8e-7); NaN and inf where padding must contribute nothing; float16 and bfloat16 computed
in float32 as TF's CPU kernels do (measured bitwise TF's; asserted within one rounding); the executors' working
memory bounded by their block budget. What is refused and the grouped Conv2D executors:
tests/graph_ir/test_depthwise_limits.py."""

from __future__ import annotations

import tracemalloc
import zlib

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir.executors import depthwise as executors
from graph_ir.executors.onednn import onednn_runs
from tests.graph_ir.test_family_ops import PRODUCT
from tests.helpers.depthwise import (
    OPS,
    depthwise_filter_grad,
    depthwise_forward,
    depthwise_input_grad,
    floats,
    node_args,
)
from tests.helpers.train_steps import scaled_difference


def _out_shape(x_shape, f_shape, strides, padding, dilations=(1, 1), explicit=()):
    x = np.zeros(x_shape, np.float32)
    return depthwise_forward(strides, padding, dilations, explicit)(x, np.zeros(f_shape, np.float32)).shape


# (x shape, filter shape, strides, padding, dilations, explicit paddings)
GEOMETRIES = {
    "same-s1-m1": ((2, 7, 5, 3), (3, 3, 3, 1), (1, 1), "SAME", (1, 1), ()),
    "valid-s2-m2": ((2, 9, 8, 3), (3, 2, 3, 2), (2, 2), "VALID", (1, 1), ()),
    "same-s2-odd-m2": ((1, 7, 6, 2), (4, 3, 2, 2), (2, 2), "SAME", (1, 1), ()),
    "same-s21": ((2, 8, 7, 3), (3, 3, 3, 1), (2, 1), "SAME", (1, 1), ()),
    "dilated-same": ((2, 8, 7, 3), (3, 3, 3, 2), (1, 1), "SAME", (2, 3), ()),
    "dilated-valid-s2": ((2, 9, 10, 3), (3, 2, 3, 1), (2, 2), "VALID", (2, 3), ()),
    "explicit": ((2, 7, 6, 3), (3, 3, 3, 2), (2, 2), "EXPLICIT", (1, 1), (0, 0, 1, 2, 0, 3, 0, 0)),
    "kernel-larger-than-input": ((1, 2, 3, 3), (5, 5, 3, 2), (1, 1), "SAME", (1, 1), ()),
    "valid-s2-remainder": ((1, 8, 9, 2), (3, 3, 2, 2), (2, 2), "VALID", (1, 1), ()),
}


def _case(op: str, geometry: str, rng, values=floats):
    x_shape, f_shape, strides, padding, dilations, explicit = GEOMETRIES[geometry]
    y_shape = _out_shape(x_shape, f_shape, strides, padding, dilations, explicit)
    if op == "DepthwiseConv2dNative":
        return depthwise_forward(strides, padding, dilations, explicit), [values(rng, *x_shape), values(rng, *f_shape)]
    if op == "DepthwiseConv2dNativeBackpropFilter":
        return (depthwise_filter_grad(list(f_shape), strides, padding, dilations, explicit),
                [values(rng, *x_shape), values(rng, *y_shape)])
    return (depthwise_input_grad(list(x_shape), strides, padding, dilations, explicit),
            [values(rng, *f_shape), values(rng, *y_shape)])


GE_OPS = dict(zip(OPS, ("DepthwiseConv2D", "DepthwiseConv2DBackpropFilter", "DepthwiseConv2DBackpropInput")))


# What docs/lowering.md's lowering table states (checked like tests/graph_ir/test_conv_ops.py's CASES: TF op first).
# TF's CPU gradient kernels ignore dilations and multiply EXPLICIT padding (test_..._are_refused_...): forward only.
CASES = {f"{op}-{geometry}": (op, geometry, PRODUCT) for op in OPS for geometry in GEOMETRIES
         if op == OPS[0] or geometry.split("-")[0] not in ("dilated", "explicit")}


def _lower_and_run(fn, inputs):
    step = tf.function(fn)
    graph = graph_ir.from_tensorflow(step, *[tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)) for x in inputs])
    session = graph_ir.Session()
    session.add_graph(0, graph)
    (got,) = session.run_graph(0, inputs)
    return graph, got, step(*inputs).numpy()


@pytest.mark.parametrize("name", list(CASES))
def test_lowered_depthwise_op_runs_like_tensorflow(name):
    op, geometry, tolerance = CASES[name]
    fn, inputs = _case(op, geometry, np.random.default_rng(zlib.crc32(name.encode())))
    graph, got, want = _lower_and_run(fn, inputs)
    assert GE_OPS[op] in {n.type for n in graph.nodes.values()}
    assert got.shape == want.shape and got.dtype == want.dtype
    assert scaled_difference(got, want) <= tolerance, scaled_difference(got, want)


def _special(rng, *shape):
    """Rounded normals with NaN, +inf and -inf at a few places."""
    x = floats(rng, *shape)
    flat = x.reshape(-1)
    for value, step in ((np.nan, 13), (np.inf, 17), (-np.inf, 19)):
        flat[rng.integers(0, flat.size, max(1, flat.size // step))] = value
    return x


def _same_specials_and_close(got, want):
    for mask in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(mask(got), mask(want))
    finite = np.isfinite(want)
    assert scaled_difference(got[finite], want[finite]) <= PRODUCT


@pytest.mark.parametrize("geometry", ["same-s1-m1", "same-s2-odd-m2", "explicit", "kernel-larger-than-input"])
def test_padding_contributes_nothing_on_nan_and_inf_taps(geometry):
    """A NaN or inf filter tap (forward, input gradient) or out_backprop element (filter gradient) that meets only
    padding leaves the result finite, as in TF; where it meets the input, NaN and inf flow as TF's do."""
    rng = np.random.default_rng(zlib.crc32(geometry.encode()))
    _, f_shape = GEOMETRIES[geometry][:2]
    for op in OPS if geometry != "explicit" else OPS[:1]:
        fn, inputs = _case(op, geometry, rng, values=floats)
        special = 1 if op == "DepthwiseConv2dNative" else 1 if op.endswith("Filter") else 0
        inputs[special] = _special(rng, *inputs[special].shape)
        if op == "DepthwiseConv2dNative":  # a NaN and an inf at the filter's corners: they meet padding
            inputs[1][0, 0, 0, 0], inputs[1][-1, -1, -1, -1] = np.nan, np.inf
        _, got, want = _lower_and_run(fn, inputs)
        _same_specials_and_close(got, want)
    corner = np.zeros(f_shape, np.float32)
    corner[0, 0] = np.nan  # padded outputs (top-left) stay finite: 0, not 0 * NaN
    x = floats(rng, *GEOMETRIES[geometry][0])
    _, got, want = _lower_and_run(_case("DepthwiseConv2dNative", geometry, rng)[0], [x, corner])
    _same_specials_and_close(got, want)


@pytest.mark.parametrize("dtype, tolerance", [(np.float16, 2.0 ** -11), ("bfloat16", 2.0 ** -8)])
@pytest.mark.parametrize("op", OPS)
def test_16_bit_floats_compute_in_float32_like_tensorflow(op, dtype, tolerance):
    """float16 and bfloat16 inputs: computed in float32 and rounded once (the filter gradient: GE's float32 output
    cast to TF's dtype), within one rounding of the output's dtype of TF's CPU kernels. Where TF's oneDNN does not
    take float16 (an AMD EPYC, say: graph_ir/executors/onednn.py), TF's Eigen kernel sums in float16: there graph_ir
    is as close to float64 as TF at least, and within two roundings of TF (measured 1.3 and 1.0 roundings)."""
    name = dtype
    dtype = tf.bfloat16.as_numpy_dtype if dtype == "bfloat16" else dtype
    rng = np.random.default_rng(zlib.crc32(f"{op}{dtype}".encode()))
    fn, inputs = _case(op, "same-s2-odd-m2", rng)
    graph, got, want = _lower_and_run(fn, [x.astype(dtype) for x in inputs])
    assert got.dtype == want.dtype == dtype
    if op.endswith("Filter"):
        assert "Cast" in {n.type for n in graph.nodes.values()}
    if name is np.float16 and not onednn_runs("float16"):
        exact = fn(*[x.astype(dtype).astype(np.float64) for x in inputs]).numpy()
        assert scaled_difference(got, exact) <= scaled_difference(want, exact)
        tolerance *= 2
    assert scaled_difference(got, want) <= tolerance, scaled_difference(got, want)


@pytest.mark.parametrize("op", OPS)
def test_working_memory_is_bounded_by_the_block_budget(op, monkeypatch):
    """With a 256 KiB budget the executors work in blocks of rows: the peak of NumPy's allocations stays within the
    result (and, for the filter gradient, its float64 accumulator) plus a few budgets, far below the im2col of the
    input (9 x its size), and the result is the one a single block gives (bitwise for the forward op, whose every
    output is summed within one block)."""
    rng = np.random.default_rng(zlib.crc32(op.encode()))
    x_shape, f_shape = (2, 96, 80, 8), (3, 3, 8, 2)
    fn, inputs = _case(op, "same-s1-m1", rng)
    inputs = [floats(rng, *x_shape), floats(rng, *f_shape)] if op == OPS[0] else \
        [floats(rng, *x_shape), floats(rng, 2, 96, 80, 16)] if op == OPS[1] else \
        [floats(rng, *f_shape), floats(rng, 2, 96, 80, 16)]
    fn = {OPS[0]: depthwise_forward((1, 1), "SAME"), OPS[1]: depthwise_filter_grad(list(f_shape), (1, 1), "SAME"),
          OPS[2]: depthwise_input_grad(list(x_shape), (1, 1), "SAME")}[op]
    graph = graph_ir.from_tensorflow(tf.function(fn), *[tf.TensorSpec(a.shape, tf.float32) for a in inputs])
    (node,) = graph.nodes_of_type(GE_OPS[op])
    args = [a if n.node.type != "Const" else n.node.attrs["value"] for a, n in
            zip(node_args(node, inputs), node.inputs)]
    whole = executors.EXECUTORS[node.type](node, args)[0]
    budget = 256 << 10
    monkeypatch.setattr(executors, "BUDGET", budget)
    tracemalloc.start()
    try:
        (blocked,) = executors.EXECUTORS[node.type](node, args)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    result = node.output_descs[0].nbytes * (2 if op == OPS[1] else 1)
    assert peak <= result + 4 * budget, (peak, result)
    assert peak < 9 * 4 * np.prod(x_shape)
    if op == OPS[0]:  # each output's taps all in one block: the same sums in the same order
        np.testing.assert_array_equal(blocked, whole)
    else:  # an input element's (or filter tap's) terms come from several blocks: another order
        assert scaled_difference(blocked, whole) <= 1e-6
    np.testing.assert_allclose(blocked, tf.function(fn)(*inputs).numpy(), rtol=0, atol=PRODUCT * np.abs(whole).max())
