"""The matrix family's refusals: what TF refuses or graph_ir cannot run statically (a k or num_rows computed in the
step, an align TF does not know, NaN in top_k, whose order TF leaves to its sort), and hostile files (a huge
num_rows, k out of range, a Roll naming axes x lacks) refused naming the node and field before anything is
computed; and the session's plan of the executors' working memory against what they allocate. The ops run beside
TensorFlow: tests/graph_ir/test_matrix_ops.py."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import ops as ge
from tests.graph_ir.test_hostile_family_files import _loads_error, _model, _op, _run, _set_const
from tests.graph_ir.test_session_memory import _graph
from tests.graph_ir.test_slicing_ops import lower_and_run
from tests.helpers.hostile_graphs import check_plan_bounds_allocation


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
    _, build, inputs = case
    check_plan_bounds_allocation(_graph(build, inputs), inputs)
