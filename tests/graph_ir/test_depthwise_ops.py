"""The depthwise family's TF ops (graph_ir/lowering/ops/depthwise.py), each alone in a tf.function: lowered, run in
graph_ir.Session and compared with TensorFlow (tf.raw_ops.DepthwiseConv2dNative and its two gradients) on fresh
random inputs with zeros, negatives and ties, odd sizes, strides 1 and 2, SAME, VALID and EXPLICIT padding,
dilations, channel multipliers 1 and 2, within 1e-5 of the output's scale (products and sums: NumPy's order against
Eigen's; measured at most 1.8e-7); NaN and inf where padding must contribute nothing; float16 and bfloat16 computed
in float32 as TF's CPU kernels do (measured bitwise TF's; asserted within one rounding); the executors' working
memory bounded by their block budget; the gradients TF's CPU kernels compute otherwise than GE's ops (dilations,
EXPLICIT padding) refused; and the grouped Conv2D executors (graph_ir.executors.depthwise.GROUPED) against TF's
grouped Conv2D and its gradients."""

from __future__ import annotations

import tracemalloc
import zlib

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir.executors import depthwise as executors
from tests.graph_ir.test_family_ops import PRODUCT
from tests.helpers.train_steps import scaled_difference


def _floats(rng, *shape):
    """Normals (negatives) with every fifth element an exact zero and ties (every seventh repeats its neighbour)."""
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[::5] = 0
    ties = flat[2::7]
    flat[1::7][:ties.size] = ties
    return x


def _forward(strides, padding, dilations=(1, 1), explicit=()):
    return lambda x, f: tf.raw_ops.DepthwiseConv2dNative(
        input=x, filter=f, strides=[1, *strides, 1], padding=padding, explicit_paddings=list(explicit),
        dilations=[1, *dilations, 1])


def _filter_grad(shape, strides, padding, dilations=(1, 1), explicit=()):
    return lambda x, dy: tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
        input=x, filter_sizes=shape, out_backprop=dy, strides=[1, *strides, 1], padding=padding,
        explicit_paddings=list(explicit), dilations=[1, *dilations, 1])


def _input_grad(shape, strides, padding, dilations=(1, 1), explicit=()):
    return lambda f, dy: tf.raw_ops.DepthwiseConv2dNativeBackpropInput(
        input_sizes=shape, filter=f, out_backprop=dy, strides=[1, *strides, 1], padding=padding,
        explicit_paddings=list(explicit), dilations=[1, *dilations, 1])


def _out_shape(x_shape, f_shape, strides, padding, dilations=(1, 1), explicit=()):
    x = np.zeros(x_shape, np.float32)
    return _forward(strides, padding, dilations, explicit)(x, np.zeros(f_shape, np.float32)).shape


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


def _case(op: str, geometry: str, rng, values=_floats):
    x_shape, f_shape, strides, padding, dilations, explicit = GEOMETRIES[geometry]
    y_shape = _out_shape(x_shape, f_shape, strides, padding, dilations, explicit)
    if op == "DepthwiseConv2dNative":
        return _forward(strides, padding, dilations, explicit), [values(rng, *x_shape), values(rng, *f_shape)]
    if op == "DepthwiseConv2dNativeBackpropFilter":
        return (_filter_grad(list(f_shape), strides, padding, dilations, explicit),
                [values(rng, *x_shape), values(rng, *y_shape)])
    return (_input_grad(list(x_shape), strides, padding, dilations, explicit),
            [values(rng, *f_shape), values(rng, *y_shape)])


OPS = ("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropFilter", "DepthwiseConv2dNativeBackpropInput")
GE_OPS = dict(zip(OPS, ("DepthwiseConv2D", "DepthwiseConv2DBackpropFilter", "DepthwiseConv2DBackpropInput")))
# What the README's lowering table states (checked like tests/graph_ir/test_conv_ops.py's CASES: TF op first).
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
    x = _floats(rng, *shape)
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
        fn, inputs = _case(op, geometry, rng, values=_floats)
        special = 1 if op == "DepthwiseConv2dNative" else 1 if op.endswith("Filter") else 0
        inputs[special] = _special(rng, *inputs[special].shape)
        if op == "DepthwiseConv2dNative":  # a NaN and an inf at the filter's corners: they meet padding
            inputs[1][0, 0, 0, 0], inputs[1][-1, -1, -1, -1] = np.nan, np.inf
        _, got, want = _lower_and_run(fn, inputs)
        _same_specials_and_close(got, want)
    corner = np.zeros(f_shape, np.float32)
    corner[0, 0] = np.nan  # padded outputs (top-left) stay finite: 0, not 0 * NaN
    x = _floats(rng, *GEOMETRIES[geometry][0])
    _, got, want = _lower_and_run(_case("DepthwiseConv2dNative", geometry, rng)[0], [x, corner])
    _same_specials_and_close(got, want)


@pytest.mark.parametrize("dtype, tolerance", [(np.float16, 2.0 ** -11), ("bfloat16", 2.0 ** -8)])
@pytest.mark.parametrize("op", OPS)
def test_16_bit_floats_compute_in_float32_like_tensorflow(op, dtype, tolerance):
    """float16 and bfloat16 inputs: computed in float32 and rounded once (the filter gradient: GE's float32 output
    cast to TF's dtype), within one rounding of the output's dtype of TF's CPU kernels."""
    dtype = tf.bfloat16.as_numpy_dtype if dtype == "bfloat16" else dtype
    rng = np.random.default_rng(zlib.crc32(f"{op}{dtype}".encode()))
    fn, inputs = _case(op, "same-s2-odd-m2", rng)
    graph, got, want = _lower_and_run(fn, [x.astype(dtype) for x in inputs])
    assert got.dtype == want.dtype == dtype
    if op.endswith("Filter"):
        assert "Cast" in {n.type for n in graph.nodes.values()}
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
    inputs = [_floats(rng, *x_shape), _floats(rng, *f_shape)] if op == OPS[0] else \
        [_floats(rng, *x_shape), _floats(rng, 2, 96, 80, 16)] if op == OPS[1] else \
        [_floats(rng, *f_shape), _floats(rng, 2, 96, 80, 16)]
    fn = {OPS[0]: _forward((1, 1), "SAME"), OPS[1]: _filter_grad(list(f_shape), (1, 1), "SAME"),
          OPS[2]: _input_grad(list(x_shape), (1, 1), "SAME")}[op]
    graph = graph_ir.from_tensorflow(tf.function(fn), *[tf.TensorSpec(a.shape, tf.float32) for a in inputs])
    (node,) = graph.nodes_of_type(GE_OPS[op])
    args = [a if n.node.type != "Const" else n.node.attrs["value"] for a, n in
            zip(_node_args(node, inputs), node.inputs)]
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


def _node_args(node, inputs):
    """The executor's arguments: the graph's inputs in order for Data-fed ports, Const values for the others."""
    fed = iter(inputs)
    return [None if h.node.type == "Const" else next(fed) for h in node.inputs]


@pytest.mark.parametrize("op", OPS[1:])
def test_explicit_padding_gradients_are_refused_as_tensorflows_cpu_kernels_multiply_the_padding(op):
    """With EXPLICIT padding TF's CPU gradient kernels multiply the padding as zeros, so an inf meeting it gives NaN
    there, unlike SAME (and GE's pads, which contribute nothing): refused, naming the node and attr."""
    x, ones = np.ones((1, 5, 5, 1), np.float32), np.ones((3, 3, 1, 1), np.float32)
    dy, f = np.zeros((1, 5, 5, 1), np.float32), ones.copy()
    dy[0, 0, 0, 0], f[0, 0, 0, 0] = np.inf, np.inf
    first, second = (x, dy) if op.endswith("Filter") else (f, np.ones_like(dy))
    make = _filter_grad if op.endswith("Filter") else _input_grad
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
    x, f = _floats(rng, 1, 6, 5, 2), _floats(rng, 3, 3, 2, 1)
    forward = _forward((1, 1), "SAME", (2, 2))
    dy = _floats(rng, *forward(x, f).shape)
    if op.endswith("Filter"):
        dilated = _filter_grad([3, 3, 2, 1], (1, 1), "SAME", (2, 2))
        plain = _filter_grad([3, 3, 2, 1], (1, 1), "SAME")
        first, unit_of = x, lambda e: forward(x, e)
    else:
        dilated = _input_grad([1, 6, 5, 2], (1, 1), "SAME", (2, 2))
        plain = _input_grad([1, 6, 5, 2], (1, 1), "SAME")
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

    from graph_ir.dtypes import BY_NAME
    from graph_ir.nodes import TensorDesc
    return SimpleNamespace(attrs=attrs, output_descs=[TensorDesc("y", BY_NAME[dtype], tuple(shape))])


@pytest.mark.parametrize("geometry", list(GROUPED_GEOMETRIES))
def test_grouped_conv2d_executors_run_like_tensorflows_grouped_conv2d(geometry):
    """Forward and both gradients against tf.raw_ops.Conv2D, Conv2DBackpropFilter and Conv2DBackpropInput with a
    grouped filter, within 1e-5 of the output's scale. float32 only: TF's float64 CPU kernels refuse groups."""
    from graph_ir.opset.conv import same_padding
    x_shape, f_shape, s, padding, d = GROUPED_GEOMETRIES[geometry]
    rng = np.random.default_rng(zlib.crc32(geometry.encode()))
    x, f = _floats(rng, *x_shape), _floats(rng, *f_shape)
    common = {"strides": [1, s, s, 1], "padding": padding, "dilations": [1, d, d, 1]}
    y = tf.raw_ops.Conv2D(input=x, filter=f, **common).numpy()
    dy = _floats(rng, *y.shape)
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

    from graph_ir.lowering.ops.depthwise import conv_groups
    node = SimpleNamespace(op="Conv2D", name="conv")
    assert conv_groups(node, 8, 2, 12) == 4 and conv_groups(node, 3, 3, 5) == 1
    for channels in ((8, 3, 12), (8, 2, 10), (8, 0, 4)):
        with pytest.raises(graph_ir.LoweringError, match=r"Conv2D 'conv': x has \d+ channels and the filter \d+ inputs"):
            conv_groups(node, *channels)
