"""The matrix family's TF ops (graph_ir/lowering/ops/matrix.py), each alone in a tf.function: lowered, run in
graph_ir.Session and compared with TensorFlow bitwise (they select and move values) on inputs with zeros, -0.0,
ties, NaN, +-inf, empty and odd sizes, batch dims and bool where the GE op declares it; the gradients TF takes
through them; GE's TopKV2 attributes TF never sets (dim, largest) in built graphs. The refusals and hostile files:
tests/graph_ir/test_matrix_refusals.py."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import ops as ge
from graph_ir.lowering import ops
from tests.graph_ir.test_activation_ops import _special
from tests.graph_ir.test_hostile_family_files import _model, _run
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
