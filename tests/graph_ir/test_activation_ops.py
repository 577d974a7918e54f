"""The activation and logic families' TF ops (graph_ir/lowering/ops/activation.py, logic.py), each alone in a
tf.function: lowered, run in graph_ir.Session and compared with TensorFlow on fresh random inputs with zeros, -0.0,
negatives, ties, odd sizes, NaN and +-inf (the 16-bit floats too, where the REG_OP takes them). Tolerance 0 means
bitwise: the same bits at every element (NaN at the same places, any NaN payload), so -0.0 against 0.0 fails; else
NaN and inf at the same places and the finite elements within the tolerance relative to the output's scale."""

from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir.lowering import ops
from tests.graph_ir.test_family_ops import ROUNDING, _floats
from tests.helpers.train_steps import scaled_difference

BF16 = ml_dtypes.bfloat16


def _special(rng, *shape, dtype=np.float32, scale: float = 3.0):
    """_floats (zeros, ties) scaled, with -0.0, NaN, +inf and -inf mixed in, as `dtype`."""
    x = (_floats(rng, *shape) * scale).astype(dtype)
    flat = x.reshape(-1)
    for k, v in enumerate((-0.0, np.nan, np.inf, -np.inf)):
        flat[3 + k::11] = v
    return x


def _grad(op: str, **names):
    """tf.raw_ops.<op> with its two inputs named as TF names them, plus fixed attributes."""
    first, second = (k for k, v in names.items() if v is None)
    attrs = {k: v for k, v in names.items() if v is not None}
    return lambda a, b: getattr(tf.raw_ops, op)(**{first: a, second: b}, **attrs)


def _xent(features, labels):
    return tf.raw_ops.SoftmaxCrossEntropyWithLogits(features=features, labels=labels)


def _probabilities(rng, rows, classes):
    p = rng.random((rows, classes)).astype(np.float32)
    p[:, ::3] = 0
    return p / p.sum(axis=1, keepdims=True)


def _labels(rng, *shape, high=5):
    return rng.integers(-1, high + 1, shape).astype(np.int32)  # -1 and high: outside [0, high)


_NAN_ROWS = np.array([[np.nan, 1, 2, np.nan], [np.nan] * 4, [1, np.nan, 3, 3], [-np.inf, np.nan, -np.inf, np.nan],
                      [np.nan, -1, -5, np.nan]], np.float32)  # TF skips NaN; an all-NaN row gives index 0

_TOP_K_ROWS = np.array([[0.1, 0.5, 0.5, 0.2, 0.0], [1, 2, 3, 3, 0], [np.nan, 1, 2, 3, 4], [1, 1, 1, 1, 1],
                        [0, np.inf, 1, 2, 3], [3, 2, 1, 0, -1], [-0.0, 0.0, 0.0, -1, -2]], np.float32)  # ties, NaN, inf

# "TFop" or "TFop-variant" -> (function of tensors, inputs from rng, tolerance)
CASES = {
    "Relu6": (tf.nn.relu6, lambda r: [_special(r, 37, scale=5)], 0),
    "Relu6-float16": (tf.nn.relu6, lambda r: [_special(r, 37, dtype=np.float16, scale=5)], 0),
    "Relu6-bfloat16": (tf.nn.relu6, lambda r: [_special(r, 37, dtype=BF16, scale=5)], 0),
    "Relu6Grad": (_grad("Relu6Grad", gradients=None, features=None),
                  lambda r: [_special(r, 5, 7), np.round(_special(r, 5, 7, scale=5))], 0),
    "LeakyRelu": (lambda x: tf.nn.leaky_relu(x, alpha=0.3), lambda r: [_special(r, 37)], 0),
    "LeakyRelu-float16": (lambda x: tf.nn.leaky_relu(x, alpha=0.3), lambda r: [_special(r, 37, dtype=np.float16)], 0),
    "LeakyRelu-steep": (lambda x: tf.nn.leaky_relu(x, alpha=1.7), lambda r: [_special(r, 37)], 0),
    "LeakyReluGrad": (_grad("LeakyReluGrad", gradients=None, features=None, alpha=0.2),
                      lambda r: [_special(r, 37), _special(r, 37)], 0),
    "Elu": (tf.nn.elu, lambda r: [_special(r, 37)], ROUNDING),
    "EluGrad": (_grad("EluGrad", gradients=None, outputs=None), lambda r: [_special(r, 37), _special(r, 37)], 0),
    "Selu": (tf.nn.selu, lambda r: [_special(r, 37)], ROUNDING),
    "SeluGrad": (_grad("SeluGrad", gradients=None, outputs=None), lambda r: [_special(r, 37), _special(r, 37)], 0),
    "Softplus": (tf.nn.softplus, lambda r: [_special(r, 37, scale=12)], ROUNDING),
    "Softplus-float16": (tf.nn.softplus, lambda r: [_special(r, 37, dtype=np.float16, scale=8)], ROUNDING),
    "SoftplusGrad": (_grad("SoftplusGrad", gradients=None, features=None),
                     lambda r: [_special(r, 37), _special(r, 37, scale=8)], ROUNDING),
    "Softsign": (tf.nn.softsign, lambda r: [_special(r, 37)], 0),
    "Softsign-float16": (tf.nn.softsign, lambda r: [_special(r, 37, dtype=np.float16)], 0),
    "SoftsignGrad": (_grad("SoftsignGrad", gradients=None, features=None),
                     lambda r: [_special(r, 37), _special(r, 37)], 0),
    "Log1p": (tf.math.log1p, lambda r: [_special(r, 37)], ROUNDING),
    "Expm1": (tf.math.expm1, lambda r: [_special(r, 37)], ROUNDING),
    # Eigen divides by a reciprocal estimate refined by a Newton step in its packets: not bitwise 1 / x
    "Reciprocal": (tf.math.reciprocal, lambda r: [_special(r, 37)], ROUNDING),
    "Reciprocal-bfloat16": (tf.math.reciprocal, lambda r: [_special(r, 37, dtype=BF16)], 0),
    "Inv": (lambda x: tf.raw_ops.Inv(x=x), lambda r: [_special(r, 37)], ROUNDING),
    "ReciprocalGrad": (_grad("ReciprocalGrad", y=None, dy=None), lambda r: [_special(r, 37), _special(r, 37)], 0),
    "InvGrad": (_grad("InvGrad", y=None, dy=None), lambda r: [_special(r, 37), _special(r, 37)], 0),
    # 16-bit floats: Eigen rounds each step of the functor to the 16-bit type, as the executors do.
    "Elu-float16": (tf.nn.elu, lambda r: [_special(r, 301, dtype=np.float16)], ROUNDING),
    "EluGrad-float16": (_grad("EluGrad", gradients=None, outputs=None),
                        lambda r: [_special(r, 301, dtype=np.float16), _special(r, 301, dtype=np.float16)], 0),
    "Selu-float16": (tf.nn.selu, lambda r: [_special(r, 301, dtype=np.float16)], ROUNDING),
    "SeluGrad-float16": (_grad("SeluGrad", gradients=None, outputs=None),
                         lambda r: [_special(r, 301, dtype=np.float16), _special(r, 301, dtype=np.float16)], 0),
    "LeakyReluGrad-float16": (_grad("LeakyReluGrad", gradients=None, features=None, alpha=0.2),
                              lambda r: [_special(r, 301, dtype=np.float16), _special(r, 301, dtype=np.float16)], 0),
    "Relu6Grad-bfloat16": (_grad("Relu6Grad", gradients=None, features=None),
                           lambda r: [_special(r, 301, dtype=BF16), _special(r, 301, dtype=BF16, scale=5)], 0),
    "SoftplusGrad-float16": (_grad("SoftplusGrad", gradients=None, features=None),
                             lambda r: [_special(r, 301, dtype=np.float16), _special(r, 301, dtype=np.float16)],
                             ROUNDING),
    "SoftsignGrad-float16": (_grad("SoftsignGrad", gradients=None, features=None),
                             lambda r: [_special(r, 301, dtype=np.float16), _special(r, 301, dtype=np.float16)], 0),
    "Log1p-bfloat16": (tf.math.log1p, lambda r: [_special(r, 301, dtype=BF16)], ROUNDING),
    "Expm1-float16": (tf.math.expm1, lambda r: [_special(r, 301, dtype=np.float16)], ROUNDING),
    "ReciprocalGrad-bfloat16": (_grad("ReciprocalGrad", y=None, dy=None),
                                lambda r: [_special(r, 301, dtype=BF16), _special(r, 301, dtype=BF16)], 0),
    "LogSoftmax": (tf.nn.log_softmax, lambda r: [_floats(r, 5, 7) * 3], ROUNDING),
    "SoftmaxCrossEntropyWithLogits": (_xent, lambda r: [_floats(r, 5, 7) * 3, _probabilities(r, 5, 7)], ROUNDING),
    "LogicalAnd": (tf.logical_and, lambda r: [r.random((4, 5)) < 0.5, r.random((5,)) < 0.5], 0),
    "LogicalOr": (tf.logical_or, lambda r: [r.random((4, 5)) < 0.5, r.random((4, 1)) < 0.5], 0),
    "LogicalNot": (tf.logical_not, lambda r: [r.random((3, 7)) < 0.5], 0),
    "Bitcast": (lambda x: tf.bitcast(x, tf.int32), lambda r: [_special(r, 5, 7)], 0),
    "Bitcast-narrower": (lambda x: tf.bitcast(x, tf.uint8), lambda r: [_special(r, 3, 5)], 0),
    "Bitcast-wider": (lambda x: tf.bitcast(x, tf.float32), lambda r: [r.integers(-128, 128, (3, 4)).astype(np.int8)],
                      0),
    "BitwiseAnd": (tf.bitwise.bitwise_and,
                   lambda r: [r.integers(-2**31, 2**31, (4, 5)).astype(np.int32), np.array(-2**31, np.int32)], 0),
    "ArgMax": (lambda x: tf.argmax(x, axis=1, output_type=tf.int32), lambda r: [np.round(_special(r, 6, 9))], 0),
    "ArgMax-int64-axis0": (lambda x: tf.argmax(x, axis=0), lambda r: [np.round(_special(r, 7, 4))], 0),
    "ArgMin": (lambda x: tf.argmin(x, axis=-1), lambda r: [np.round(_special(r, 6, 9))], 0),
    "ArgMax-nan-rows": (lambda x: tf.argmax(x, axis=1), lambda r: [_NAN_ROWS], 0),
    "ArgMin-nan-rows": (lambda x: tf.argmin(x, axis=1), lambda r: [_NAN_ROWS], 0),
    "InTopKV2": (lambda p, t: tf.math.in_top_k(t, p, 2),
                 lambda r: [_TOP_K_ROWS, np.array([1, 3, 0, 2, 4, 1, 2], np.int32)], 0),
    "InTopKV2-int64": (lambda p, t: tf.math.in_top_k(t, p, 1), lambda r: [np.round(_floats(r, 9, 4)),
                                                                          r.integers(-1, 5, 9)], 0),
    "MatrixDiagPartV3": (lambda x: tf.linalg.diag_part(x), lambda r: [_special(r, 2, 3, 5)], 0),
    "MatrixDiagPartV3-below": (lambda x: tf.linalg.diag_part(x, k=-2), lambda r: [_special(r, 4, 3)], 0),
    "Ceil": (tf.math.ceil, lambda r: [_special(r, 37)], 0),
    "OneHot": (lambda i: tf.one_hot(i, 5), lambda r: [_labels(r, 7)], 0),
    "OneHot-axis0": (lambda i, on: tf.one_hot(i, 4, on_value=on, off_value=-on, axis=0),
                     lambda r: [_labels(r, 3, 5, high=4), np.float32(2.5)], 0),
    "ClipByValue": (lambda x: tf.raw_ops.ClipByValue(t=x, clip_value_min=-1.5, clip_value_max=2.0),
                    lambda r: [_special(r, 37)], 0),
    "ClipByValue-crossed-bounds": (lambda x, lo, hi: tf.raw_ops.ClipByValue(t=x, clip_value_min=lo, clip_value_max=hi),
                                   lambda r: [_special(r, 5, 7), _floats(r, 5, 7) + 1, _floats(r, 5, 7) - 1], 0),
    "IsFinite": (tf.math.is_finite, lambda r: [_special(r, 37)], 0),
    "IsNan": (tf.math.is_nan, lambda r: [_special(r, 37)], 0),
    "IsInf": (tf.math.is_inf, lambda r: [_special(r, 37)], 0),
    "All": (lambda x: tf.reduce_all(x, axis=1), lambda r: [r.random((5, 3)) < 0.8], 0),
    "All-empty-axis": (lambda x: tf.reduce_all(x, axis=[0, 2], keepdims=True), lambda r: [np.zeros((3, 0, 2), bool)],
                       0),
    "Any": (lambda x: tf.reduce_any(x, axis=0), lambda r: [r.random((5, 3)) < 0.2], 0),
    "Any-empty-axis": (lambda x: tf.reduce_any(x, axis=1), lambda r: [np.zeros((3, 0), bool)], 0),
}


# TF's float32 Relu and Relu6 keep -0.0 in Eigen's scalar tail but give 0.0 in its SIMD packets (measured: the
# last n % 16 elements keep the sign), so the sign of a zero from -0.0 depends on where it lies; the executors keep
# -0.0 (the scalar rule, and what TF's 16-bit kernels do everywhere). Those cases accept a zero of either sign.
ZERO_SIGN_BY_LAYOUT = {"Relu6", "Relu6Grad", "Relu"}


def assert_matches(got: np.ndarray, want: np.ndarray, tolerance: float, what: str, any_zero_sign: bool = False) -> None:
    """Bitwise (tolerance 0: NaN at the same places, every other element the same bits; with any_zero_sign, 0.0 and
    -0.0 alike) or NaN/inf at the same places and the finite elements within `tolerance` of the output's scale."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape, want.dtype, want.shape)
    if got.dtype.kind == "c":  # complex: its real and imaginary parts side by side, judged as floats
        got, want = (np.stack([x.real, x.imag], -1) for x in (got, want))
    if got.dtype.kind not in "fV":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"{what}: NaN places")
    finite = np.isfinite(w)
    np.testing.assert_array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)], err_msg=f"{what}: inf")
    if tolerance == 0:
        bits = np.dtype(f"u{got.dtype.itemsize}")
        same = (got.view(bits) == want.view(bits)) | (any_zero_sign & (g == 0) & (w == 0))
        assert np.all(same | np.isnan(w)), (what, got[~same], want[~same])
    else:
        difference = scaled_difference(g[finite], w[finite])
        assert difference <= tolerance, (what, difference)


def run_lowered(fn, inputs: list[np.ndarray]) -> tuple[graph_ir.Graph, list[np.ndarray], list[np.ndarray]]:
    """fn lowered from a tf.function traced on the inputs' dtypes and shapes; the session's and TF's outputs."""
    step = tf.function(fn)
    graph = graph_ir.from_tensorflow(step, *[tf.TensorSpec(np.shape(x), tf.as_dtype(np.asarray(x).dtype))
                                             for x in inputs])
    session = graph_ir.Session()
    session.add_graph(0, graph)
    got = session.run_graph(0, [np.asarray(x) for x in inputs])
    want = [t.numpy() for t in tf.nest.flatten(step(*inputs))]
    return graph, got, want


def check_case(name: str, case, ge_type: str | None = None, any_zero_sign: bool = False) -> None:
    """Runs CASES-style case `name` ((fn, inputs from rng, tolerance)) lowered and in TF on inputs seeded by its name:
    the graph holds `ge_type` (by default the GE op the TF op before the name's "-" lowers onto), and every output
    matches TF's (assert_matches)."""
    fn, make_inputs, tolerance = case
    inputs = make_inputs(np.random.default_rng(zlib.crc32(name.encode())))
    graph, got, want = run_lowered(fn, inputs)
    ge_type = ge_type or ops.LOWERINGS[name.split("-")[0]].ge_type
    assert graph.nodes_of_type(ge_type), (name, ge_type, sorted({n.type for n in graph.nodes.values()}))
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_matches(g, w, tolerance, f"{name} output {k}", any_zero_sign=any_zero_sign)


@pytest.mark.parametrize("name", list(CASES))
def test_lowered_op_runs_like_tensorflow(name):
    check_case(name, CASES[name], any_zero_sign=name in ZERO_SIGN_BY_LAYOUT)


def test_every_activation_and_logic_lowering_is_tested():
    from graph_ir.lowering.ops import activation, logic

    tested = {name.split("-")[0] for name in CASES}
    assert set(activation.LOWERINGS) | set(logic.LOWERINGS) <= tested, sorted(
        set(activation.LOWERINGS) | set(logic.LOWERINGS) - tested)


@pytest.mark.parametrize("name, fn, make_inputs", [
    ("Relu", tf.nn.relu, lambda r: [_special(r, 37, dtype=BF16)]),
    # + 0 turns -0.0 into 0.0: which zero of a window holding both TF returns is the conv executors' matter
    ("MaxPool", lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID"), lambda r: [_special(r, 2, 6, 5, 3, dtype=BF16) + 0]),
    ("MaxPoolGrad", lambda x, dy: tf.raw_ops.MaxPoolGrad(orig_input=x, orig_output=tf.nn.max_pool2d(x, 2, 2, "SAME"),
                                                         grad=dy, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
                                                         padding="SAME"),
     lambda r: [np.round(_floats(r, 2, 5, 5, 3) * 3).astype(BF16), _floats(r, 2, 3, 3, 3).astype(BF16)]),
    # float32 sums of bfloat16 products rounded once: measured bitwise TF's here
    ("Conv2DBackpropInput", lambda f, dy: tf.raw_ops.Conv2DBackpropInput(
        input_sizes=[2, 7, 7, 3], filter=f, out_backprop=dy, strides=[1, 2, 2, 1], padding="SAME"),
     lambda r: [_floats(r, 3, 3, 3, 4).astype(BF16), _floats(r, 2, 4, 4, 4).astype(BF16)]),
    ("Conv2DBackpropFilter", lambda x, dy: tf.raw_ops.Conv2DBackpropFilter(
        input=x, filter_sizes=[3, 3, 3, 4], out_backprop=dy, strides=[1, 2, 2, 1], padding="SAME"),
     lambda r: [_floats(r, 2, 7, 7, 3).astype(BF16), _floats(r, 2, 4, 4, 4).astype(BF16)]),
])
def test_bfloat16_ops_run_in_float32_between_casts_bitwise(name, fn, make_inputs):
    """GE's Relu, MaxPool, MaxPoolGrad and Conv2D gradients declare no bfloat16: the lowering casts to float32 and
    back, which is TF's bfloat16 result bit for bit (max, selection and routing are exact; the sums here too)."""
    inputs = make_inputs(np.random.default_rng(zlib.crc32(name.encode())))
    graph, got, want = run_lowered(fn, inputs)
    (node,) = graph.nodes_of_type(name)
    assert node.output_descs[0].dtype.name == "float32"
    assert all(h.node.type == "Cast" for h in node.inputs if h.dtype.name != "int32")  # not the Const sizes
    for g, w in zip(got, want):
        assert_matches(g, w, 0, name, any_zero_sign=name in ZERO_SIGN_BY_LAYOUT)


def test_a_16_bit_float_an_op_does_not_declare_is_refused_naming_the_node():
    x = tf.TensorSpec((4,), tf.bfloat16)
    with pytest.raises(graph_ir.LoweringError, match=r"TF LeakyRelu 'LeakyRelu'.*bfloat16"):
        graph_ir.from_tensorflow(tf.function(lambda x: tf.nn.leaky_relu(x)), x)
