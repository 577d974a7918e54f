"""The matrix family's TF ops (graph_ir/lowering/ops/matrix.py), each alone in a tf.function: lowered, run in
graph_ir.Session and compared with TensorFlow bitwise (they select and move values) on inputs with zeros, -0.0,
ties, NaN, +-inf, empty and odd sizes, batch dims and bool where the GE op declares it; the gradients TF takes
through them; the graphs TF refuses, and hostile files (a huge num_rows, k out of range) refused before anything
is computed."""

from __future__ import annotations

import re
import time
import zlib

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import ops as ge
from graph_ir.lowering import ops
from tests.graph_ir.test_activation_ops import _special
from tests.graph_ir.test_hostile_family_files import _loads_error, _model, _op, _run, _set_const
from tests.graph_ir.test_slicing_ops import lower_and_run

_ALIGNS = ("LEFT_RIGHT", "RIGHT_LEFT", "LEFT_LEFT", "RIGHT_RIGHT")


def _empty(rng, *shape):
    return np.zeros(shape, np.float32)


def _bools(rng, *shape):
    return rng.random(shape) < 0.6


def _ints(rng, *shape, dtype=np.int32):
    return rng.integers(-4, 5, shape).astype(dtype)  # many ties


def _grad(fn):
    """The gradient TF takes through fn at x for the output gradient dy: what a training step holds."""

    def grad(x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tape.gradient(y, x, output_gradients=dy)

    return grad


def _top_k_values(k):
    return lambda x: tf.math.top_k(x, k).values


# name ("TFOp-variant") -> (function of tensors, inputs from rng)
CASES = {
    "MatrixBandPart-causal": (lambda x: tf.linalg.band_part(x, -1, 0), lambda r: [_special(r, 2, 5, 5)]),
    "MatrixBandPart-band": (lambda x: tf.linalg.band_part(x, 1, 2), lambda r: [_special(r, 3, 4, 7)]),
    "MatrixBandPart-upper-all": (lambda x: tf.linalg.band_part(x, 0, -1), lambda r: [_special(r, 7, 3)]),
    "MatrixBandPart-at-the-limits": (lambda x: tf.linalg.band_part(x, 4, 3), lambda r: [_special(r, 2, 1, 4, 3)]),
    "MatrixBandPart-bool-mask": (lambda x: tf.linalg.band_part(x, -1, 0), lambda r: [_bools(r, 6, 6)]),
    "MatrixBandPart-bool-of-ones-folded": (lambda x: tf.logical_and(x, tf.linalg.band_part(tf.ones((5, 5), tf.bool), -1, 0)),
                                    lambda r: [_bools(r, 2, 5, 5)]),
    "MatrixBandPart-int64-bounds": (lambda x: tf.linalg.band_part(x, tf.constant(1, tf.int64),
                                                                  tf.constant(-1, tf.int64)),
                                    lambda r: [_ints(r, 4, 5, dtype=np.int64)]),
    "MatrixBandPart-bounds-fed": (lambda x, lo, hi: tf.linalg.band_part(x, lo, hi),
                                  lambda r: [_special(r, 5, 6), np.int32(2), np.int32(-1)]),
    "MatrixBandPart-empty": (lambda x: tf.linalg.band_part(x, -1, 0), lambda r: [_empty(r, 2, 0, 3)]),
    "MatrixBandPart-float16": (lambda x: tf.linalg.band_part(x, 0, 1),
                               lambda r: [_special(r, 3, 5, dtype=np.float16)]),
    "MatrixBandPart-bfloat16": (lambda x: tf.linalg.band_part(x, -1, 0),
                                lambda r: [_special(r, 2, 6, 6).astype(tf.bfloat16.as_numpy_dtype)]),
    "MatrixDiagV3": (lambda x: tf.linalg.diag(x), lambda r: [_special(r, 2, 5)]),
    "MatrixDiagV3-k-padding": (lambda x: tf.linalg.diag(x, k=-2, num_rows=6, padding_value=7.5),
                               lambda r: [_special(r, 3, 4)]),
    "MatrixDiagV3-wide": (lambda x: tf.linalg.diag(x, k=1, num_cols=7), lambda r: [_special(r, 3)]),
    **{f"MatrixDiagV3-band-{a}": (lambda x, a=a: tf.linalg.diag(x, k=(-1, 2), num_rows=4, num_cols=5, align=a),
                                  lambda r: [_special(r, 2, 4, 4)]) for a in _ALIGNS},
    "MatrixDiagV3-band-inferred": (lambda x: tf.linalg.diag(x, k=(1, 3), align="LEFT_LEFT"),
                                   lambda r: [_special(r, 3, 3)]),
    "MatrixDiagV3-bool": (lambda x: tf.linalg.diag(x, k=(0, 1)), lambda r: [_bools(r, 2, 2, 4)]),
    "MatrixDiagV3-int32": (lambda x: tf.linalg.diag(x, padding_value=-1), lambda r: [_ints(r, 3, 2, 3)]),
    "MatrixDiagV3-empty": (lambda x: tf.linalg.diag(x), lambda r: [_empty(r, 3, 0)]),
    "MatrixDiagPartV3": (lambda x: tf.linalg.diag_part(x), lambda r: [_special(r, 2, 3, 5)]),
    **{f"MatrixDiagPartV3-band-{a}": (lambda x, a=a: tf.linalg.diag_part(x, k=(-2, 1), padding_value=9, align=a),
                                      lambda r: [_special(r, 2, 4, 5)]) for a in _ALIGNS},
    "MatrixDiagPartV3-band-above": (lambda x: tf.linalg.diag_part(x, k=(1, 4), align="LEFT_RIGHT"),
                                    lambda r: [_special(r, 3, 6)]),
    "MatrixDiagPartV3-band-below": (lambda x: tf.linalg.diag_part(x, k=(-4, -2), align="RIGHT_RIGHT"),
                                    lambda r: [_special(r, 6, 3)]),
    "MatrixDiagPartV3-empty": (lambda x: tf.linalg.diag_part(x), lambda r: [_empty(r, 2, 0, 3)]),
    "MatrixDiagPartV3-empty-band": (lambda x: tf.linalg.diag_part(x, k=(0, 0)), lambda r: [_empty(r, 3, 0)]),
    "MatrixDiagPartV3-int32": (lambda x: tf.linalg.diag_part(x, k=(-1, 0)), lambda r: [_ints(r, 2, 3, 3)]),
    "MatrixSetDiagV3": (lambda x, d: tf.linalg.set_diag(x, d), lambda r: [_special(r, 2, 3, 5), _special(r, 2, 3)]),
    **{f"MatrixSetDiagV3-band-{a}": (lambda x, d, a=a: tf.linalg.set_diag(x, d, k=(-1, 2), align=a),
                                     lambda r: [_special(r, 2, 5, 4), _special(r, 2, 4, 4)]) for a in _ALIGNS},
    "MatrixSetDiagV3-k": (lambda x, d: tf.linalg.set_diag(x, d, k=-3), lambda r: [_special(r, 5, 4),
                                                                                    _special(r, 2)]),
    "MatrixSetDiagV3-empty": (lambda x, d: tf.linalg.set_diag(x, d), lambda r: [_empty(r, 0, 4), _empty(r, 0)]),
    "TopKV2": (lambda x: tf.math.top_k(x, 3), lambda r: [np.round(_special(r, 4, 9).clip(-2, 2)) * 0.5]),
    "TopKV2-one": (lambda x: tf.math.top_k(x, 1), lambda r: [np.round(_special(r, 2, 3, 7).clip(-3, 3))]),
    "TopKV2-whole-row": (lambda x: tf.math.top_k(x, 11), lambda r: [np.round(_special(r, 5, 11).clip(-2, 2))]),
    "TopKV2-zero": (lambda x: tf.math.top_k(x, 0), lambda r: [_special(r, 3, 4)]),
    "TopKV2-empty": (lambda x: tf.math.top_k(x, 2), lambda r: [_empty(r, 0, 5)]),
    "TopKV2-int32": (lambda x: tf.math.top_k(x, 4), lambda r: [_ints(r, 6, 13)]),
    "TopKV2-uint8": (lambda x: tf.math.top_k(x, 4), lambda r: [r.integers(0, 4, (3, 9)).astype(np.uint8)]),
    "TopKV2-float16": (lambda x: tf.math.top_k(x, 5), lambda r: [_special(r, 3, 17, dtype=np.float16)]),
    "TopKV2-int64-indices-and-k": (lambda x: tf.raw_ops.TopKV2(input=x, k=tf.constant(3, tf.int64),
                                                               index_type=tf.int64),
                                   lambda r: [np.round(_special(r, 2, 7).clip(-2, 2))]),
    "TopKV2-bfloat16": (lambda x: tf.math.top_k(x, 3), lambda r: [_special(r, 2, 9).astype(tf.bfloat16.as_numpy_dtype)]),
    "Roll-bfloat16": (lambda x: tf.roll(x, shift=-2, axis=1), lambda r: [_special(r, 3, 5).astype(
        tf.bfloat16.as_numpy_dtype)]),
    "TopKV2-signed-zeros": (lambda x: tf.math.top_k(x, 4),
                            lambda r: [np.array([[0.0, -0.0, 1.0, -0.0, 0.0, -np.inf, np.inf]], np.float32)]),
    "Roll": (lambda x: tf.roll(x, shift=[-7, 3], axis=[1, -1]), lambda r: [_special(r, 2, 5, 4)]),
    "Roll-one-axis": (lambda x: tf.roll(x, shift=13, axis=0), lambda r: [_special(r, 5, 3)]),
    "Roll-same-axis-twice": (lambda x: tf.roll(x, shift=[2, -5], axis=[1, 1]), lambda r: [_special(r, 3, 7)]),
    "Roll-int64-huge-shift": (lambda x: tf.roll(x, shift=tf.constant([2**40 + 3, -2**41], tf.int64),
                                                axis=tf.constant([0, 1], tf.int64)), lambda r: [_special(r, 7, 5)]),
    "Roll-int32-extreme-shifts": (lambda x: tf.roll(x, shift=[6, 2**31 - 1, -2**31], axis=[0, 0, 1]),
                                  lambda r: [_special(r, 7, 3)]),
    "Roll-bool": (lambda x: tf.roll(x, shift=[1, -1], axis=[0, 1]), lambda r: [_bools(r, 3, 4)]),
    "Roll-int16": (lambda x: tf.roll(x, shift=2, axis=1), lambda r: [_ints(r, 3, 4, dtype=np.int16)]),
    "Roll-float64": (lambda x: tf.roll(x, shift=-2, axis=0), lambda r: [_special(r, 5, 3).astype(np.float64)]),
    "Roll-uint64": (lambda x: tf.roll(x, shift=3, axis=0), lambda r: [np.arange(2**64 - 9, 2**64 - 1, dtype=np.uint64)]),
    "Roll-int32": (lambda x: tf.roll(x, shift=[1, 1], axis=[0, 1]), lambda r: [_ints(r, 3, 4)]),
    "Roll-empty": (lambda x: tf.roll(x, shift=[3, 1], axis=[0, 1]), lambda r: [_empty(r, 0, 4)]),
    # the gradients
    "MatrixBandPart-grad": (_grad(lambda x: tf.linalg.band_part(x, -1, 0)),
                            lambda r: [_special(r, 2, 4, 4), _special(r, 2, 4, 4)]),
    "MatrixDiagV3-grad-of-diag-part": (_grad(lambda x: tf.linalg.diag_part(x, k=(-1, 1))),
                              lambda r: [_special(r, 2, 4, 3), _special(r, 2, 3, 3)]),
    "MatrixDiagV3-grad-of-diag-part-one": (_grad(tf.linalg.diag_part), lambda r: [_special(r, 3, 5), _special(r, 3)]),
    "MatrixSetDiagV3-grad": (lambda x, d, dy: tf.gradients(tf.linalg.set_diag(x, d), [x, d], grad_ys=dy),
                             lambda r: [_special(r, 4, 4), _special(r, 4), _special(r, 4, 4)]),
    "TopKV2-grad": (_grad(_top_k_values(3)), lambda r: [np.round(_special(r, 2, 3, 6).clip(-2, 2)),
                                                        _special(r, 2, 3, 3)]),
    "Roll-grad": (_grad(lambda x: tf.roll(x, shift=[-3, 8], axis=[0, 1])),
                  lambda r: [_special(r, 4, 5), _special(r, 4, 5)]),
}


def _no_nan(x):
    """TopKV2 refuses NaN (test_top_k_refuses_nan): its cases get NaN turned into a large finite value."""
    return np.where(np.isnan(x.astype(np.float32)), 1e4, x).astype(x.dtype) if x.dtype.kind in "fV" else x


@pytest.mark.parametrize("name", list(CASES))
def test_lowered_op_runs_like_tensorflow_bitwise(name):
    fn, make_inputs = CASES[name]
    inputs = make_inputs(np.random.default_rng(zlib.crc32(name.encode())))
    if name.startswith("TopKV2"):
        inputs = [_no_nan(x) for x in inputs]
    got, want, graph = lower_and_run(fn, inputs)
    ge_type = ops.LOWERINGS[name.split("-")[0]].ge_type
    # (a "-folded" case's op has only Const inputs: constant folding computed it while lowering)
    assert (ge_type in {n.type for n in graph.nodes.values()}) != name.endswith("-folded"), sorted({n.type for n in graph.nodes.values()})
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        assert g.tobytes() == w.tobytes(), (g, w)


def test_every_lowering_of_the_family_is_tested():
    from graph_ir.lowering.ops import matrix

    assert set(matrix.LOWERINGS) == {name.split("-")[0] for name in CASES}


def test_top_k_refuses_nan():
    """TF's order of NaN is its sort's accident (the comparator is no strict weak order with NaN): refused, naming
    the node, rather than a guess."""
    x = np.array([[1.0, np.nan, 2.0, 0.5]], np.float32)
    with pytest.raises(graph_ir.GraphError, match=r"TopKV2 'TopKV2'.*x holds NaN"):
        lower_and_run(lambda x: tf.math.top_k(x, 2), [x])
    # TF's own answers disagree with each other: k = 1 (an argmax) passes NaN over, k = 2 puts it first, and the
    # whole row sorted leaves it where the sort happened to (measured with TF 2.21's CPU kernel)
    assert tf.math.top_k(x, 1).indices.numpy().tolist() == [[2]]
    assert tf.math.top_k(x, 2).indices.numpy().tolist()[0][0] == 1


@pytest.mark.parametrize("fn, specs, message", [
    (lambda x, k: tf.math.top_k(x, k), [((3, 5), tf.float32), ((), tf.int32)], r"input 'k' must come from a Const"),
    (lambda x, k: tf.linalg.diag_part(x, k=k), [((3, 5), tf.float32), ((), tf.int32)],
     r"MatrixDiagPartV3 'diag_part': input 'k' must come from a Const"),
    (lambda x, n: tf.linalg.diag(x, num_rows=n), [((3,), tf.float32), ((), tf.int32)],
     r"MatrixDiagV3 'diag': input 'num_rows' must come from a Const"),
    (lambda x, s: tf.roll(x, s, 0), [((3, 5), tf.float32), ((), tf.int32)],
     r"Roll 'Roll'.*input 'shift' must be a constant"),
])
def test_graphs_tensorflow_or_ge_refuses_are_refused(fn, specs, message):
    with pytest.raises(graph_ir.LoweringError, match=message):
        graph_ir.from_tensorflow(tf.function(fn), *[tf.TensorSpec(s, d) for s, d in specs])


def test_tensorflow_refuses_the_align_refused():
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match="align"):
        tf.raw_ops.MatrixDiagPartV3(input=tf.zeros((3, 3)), k=0, padding_value=0.0, align="UP_DOWN")


def test_band_part_bounds_beyond_the_matrix_are_refused_as_tensorflow_refuses_them():
    fn = tf.function(lambda x, lo: tf.linalg.band_part(x, lo, -1))
    graph = graph_ir.from_tensorflow(fn, tf.TensorSpec((3, 4)), tf.TensorSpec((), tf.int32))
    session = graph_ir.Session()
    session.add_graph(0, graph)
    with pytest.raises(graph_ir.GraphError, match=r"MatrixBandPart 'MatrixBandPart': num_lower 4 .* exceed"):
        session.run_graph(0, [np.zeros((3, 4), np.float32), np.int32(4)])
    with pytest.raises(tf.errors.InvalidArgumentError):
        fn(tf.zeros((3, 4)), tf.constant(4))


def _diag_graph():
    return ge.MatrixDiagV3(graph_ir.Const(np.ones((2, 3), np.float32)), graph_ir.Const(np.int32(0), name="k"),
                           graph_ir.Const(np.int32(-1), name="rows"), graph_ir.Const(np.int32(-1), name="cols"),
                           graph_ir.Const(np.float32(0)), name="n")


@pytest.mark.parametrize("field, value, message", [
    ("rows", np.int32(2**31 - 1), r"MatrixDiagV3 'n': y of shape \[2, 2147483647, 3\] has 12884901882 elements"),
    ("cols", np.int32(-5), r"MatrixDiagV3 'n': input 'num_cols' is -5"),
    ("k", np.array([-2**31, 2**31 - 1], np.int32), r"MatrixDiagV3 'n': x of shape \[2, 3\] must hold 4294967296 "),
    ("k", np.int32(2**31 - 1), r"MatrixDiagV3 'n': y of shape \[2, 2147483650, 2147483650\] has"),
    ("k", np.zeros((2, 2), np.int32), r"MatrixDiagV3 'n': input 'k' must be a scalar or a vector"),
])
def test_a_hostile_matrix_diag_is_refused_before_it_is_computed(field, value, message):
    np.testing.assert_array_equal(_run(_model(_diag_graph))[0], np.stack([np.eye(3, dtype=np.float32)] * 2))
    model = _model(_diag_graph)
    _set_const(model, field, value)
    begin = time.perf_counter()
    _loads_error(model, message)
    assert time.perf_counter() - begin < 1.0


@pytest.mark.parametrize("k, message", [
    (np.int32(3), "input 'k': the lower diagonal 3 is out of bounds for a 2x3 matrix"),
    (np.array([-9, 0], np.int32), "input 'k': the lower diagonal -9 is out of bounds for a 2x3 matrix"),
    (np.array([2, 1], np.int32), "input 'k' is [2, 1]; its lower diagonal must not be above the upper one"),
])
def test_a_hostile_diag_part_k_is_refused(k, message):
    def build():
        return ge.MatrixDiagPartV3(graph_ir.Const(np.ones((2, 3), np.float32)), graph_ir.Const(np.int32(0), name="k"),
                                   graph_ir.Const(np.float32(0)), name="n")

    model = _model(build)
    _set_const(model, "k", k)
    _loads_error(model, re.escape(f"MatrixDiagPartV3 'n': {message}"))
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match="out of bound|lower_diag_index"):
        tf.raw_ops.MatrixDiagPartV3(input=tf.ones((2, 3)), k=k, padding_value=0.0)


@pytest.mark.parametrize("op_type", ["MatrixDiagPartV3", "MatrixDiagV3", "MatrixSetDiagV3"])
def test_an_align_tensorflow_refuses_is_refused(op_type):
    """TF takes LEFT_RIGHT, RIGHT_LEFT, LEFT_LEFT, RIGHT_RIGHT only (test_tensorflow_refuses_the_align_refused)."""

    def build():
        x, k, zero = graph_ir.Const(np.ones((3, 3), np.float32)), graph_ir.Const(np.int32(0)), np.float32(0)
        if op_type == "MatrixDiagPartV3":
            return ge.MatrixDiagPartV3(x, k, graph_ir.Const(zero), name="n")
        if op_type == "MatrixDiagV3":
            return ge.MatrixDiagV3(x, k, graph_ir.Const(np.int32(-1)), graph_ir.Const(np.int32(-1)),
                                   graph_ir.Const(zero), name="n")
        return ge.MatrixSetDiagV3(x, graph_ir.Const(np.ones(3, np.float32)), k, name="n")

    model = _model(build)
    _op(model, "n").attr["align"].s = b"UP_DOWN"
    _loads_error(model, re.escape(f"{op_type} 'n': attribute 'align' is 'UP_DOWN'; TF accepts LEFT_RIGHT, "
                                  "RIGHT_LEFT, LEFT_LEFT, RIGHT_RIGHT"))


@pytest.mark.parametrize("k, message", [(np.int32(2**31 - 1), "input 'k' is 2147483647; x has 5 values along axis 1"),
                                        (np.int32(-1), "input 'k' is -1; x has 5 values along axis 1"),
                                        (np.zeros(2, np.int32), "input 'k' must hold one value")])
def test_a_hostile_top_k_is_refused(k, message):
    def build():
        return ge.TopKV2(graph_ir.Const(np.ones((2, 5), np.float32)), graph_ir.Const(np.int32(2), name="k"), name="n")

    model = _model(build)
    _set_const(model, "k", k)
    _loads_error(model, re.escape(f"TopKV2 'n': {message}"))


def test_a_hostile_roll_is_refused():
    def build():
        return ge.Roll(graph_ir.Const(np.ones((2, 5), np.float32)), shifts=[1, 2], dims=[0, 1], name="n")

    np.testing.assert_array_equal(_run(_model(build))[0], np.ones((2, 5), np.float32))
    model = _model(build)
    _op(model, "n").attr["dims"].list.i[1] = 7
    _loads_error(model, re.escape("Roll 'n': attribute 'dims' [0, 7] must name axes of rank 2"))
    model = _model(build)
    del _op(model, "n").attr["dims"].list.i[1]
    _loads_error(model, re.escape("Roll 'n': attributes 'shifts' [1, 2] and 'dims' [0] must pair up"))


def _memory_cases():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 300, 301)).astype(np.float32)
    rows = rng.standard_normal((600, 1000)).astype(np.float32)
    k_band = np.array([-40, 30], np.int32)
    return [
        ("band-part", lambda x: ge.MatrixBandPart(x, graph_ir.Const(np.int32(-1)), graph_ir.Const(np.int32(0))), [x]),
        ("diag-part-band", lambda x: ge.MatrixDiagPartV3(x, k_band, np.float32(0), align="LEFT_RIGHT"), [x]),
        ("diag-band", lambda d: ge.MatrixDiagV3(d, k_band, np.int32(-1), np.int32(-1), np.float32(0)),
         [x[:, :71, :]]),
        ("set-diag-band", lambda x, d: ge.MatrixSetDiagV3(x, d, k_band), [x, np.ones((4, 71, 300), np.float32)]),
        ("top-k", lambda x: ge.TopKV2(x, np.int32(5))[1], [rows]),
        ("top-k-float16", lambda x: ge.TopKV2(x, np.int32(999))[0], [rows.astype(np.float16)]),
        ("roll", lambda x: ge.Roll(x, shifts=[7, -3], dims=[1, 2]), [x]),
    ]


@pytest.mark.parametrize("case", _memory_cases(), ids=lambda c: c[0])
def test_the_plan_bounds_what_a_run_allocates(case):
    """The session's plan (outputs plus graph_ir.executors.WORKSPACE) bounds what the executor really allocates."""
    from tests.graph_ir.test_session_memory import _graph
    from tests.helpers.hostile_graphs import planned_bytes, run_measured

    _, build, inputs = case
    graph = _graph(build, inputs)
    planned = planned_bytes(graph)
    _, allocated, _ = run_measured(graph, inputs)
    assert allocated <= planned + 64 * 1024, (allocated, planned)


@pytest.mark.parametrize("dim, largest", [(0, False), (-2, True), (1, False)])
def test_top_k_along_another_axis_and_smallest_first(dim, largest):
    """GE's TopKV2 attributes TF's top_k never sets (dim, largest) in a built graph: a stable sort along `dim`,
    ascending when largest=False (ties: lower index first)."""
    x = np.round(_special(np.random.default_rng(dim + 5), 6, 4, 3).clip(-2, 2))
    x[np.isnan(x)] = 7.0

    def build():
        return ge.TopKV2(graph_ir.Const(x), np.int32(3), dim=dim, largest=largest)

    values, indices = _run(_model(build))
    order = np.argsort(-x if largest else x, axis=dim, kind="stable")
    want = np.take(order, np.arange(3), axis=dim)
    np.testing.assert_array_equal(indices, want.astype(np.int32))
    assert values.tobytes() == np.take_along_axis(x, want, axis=dim).tobytes()
