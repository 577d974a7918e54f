"""The linear-algebra family (graph_ir/opset/linalg.py) against TF on well-conditioned random matrices with batch
dims, odd and empty sizes: Cholesky, MatrixInverse (with adjoint), MatrixDeterminant, LogMatrixDeterminant and
MatrixTriangularSolve (lower/upper, adjoint, broadcast batches). Our executors factor in float64 and round once, TF's
Eigen kernels work in float32: within 1e-5 of the output's scale, and at least as close to a float64 reference as TF.
Failures are TF's (not positive definite, singular), each a GraphError naming the node."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import ops
from tests.helpers import train_steps
from tests.helpers.train_steps import scaled_difference

PRODUCT = 1e-5
TESTED = ("Cholesky", "MatrixInverse", "MatrixDeterminant", "LogMatrixDeterminant", "MatrixTriangularSolve")


def _spd(rng, batch, n):
    a = rng.standard_normal((*batch, n, n))
    return (a @ np.swapaxes(a, -1, -2) / n + np.eye(n)).astype(np.float32)


def _general(rng, batch, n):
    a = rng.standard_normal((*batch, n, n)) / np.sqrt(max(n, 1)) + 2 * np.eye(n) * rng.choice([-1, 1], (*batch, 1, 1))
    return a.astype(np.float32)


def _run(fn, *feeds):
    specs = [tf.TensorSpec(f.shape, tf.as_dtype(f.dtype)) for f in feeds]
    graph = graph_ir.from_tensorflow(tf.function(fn), *specs)
    session = graph_ir.Session()
    session.add_graph(0, graph)
    want = tf.function(fn)(*feeds)
    want = [w.numpy() for w in (want if isinstance(want, (list, tuple)) else [want])]
    return session.run_graph(0, list(feeds)), want, graph


def _check(got, want, exact):
    for g, w, e in zip(got, want, exact):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert scaled_difference(g, w) <= PRODUCT
        # at least as close to float64 as TF (plus one float32 rounding of the scale)
        scale = max(float(np.max(np.abs(e))) if e.size else 0.0, 1e-30)
        assert np.max(np.abs(g - e), initial=0) <= np.max(np.abs(w - e), initial=0) + 6e-8 * scale


CASES = {
    "Cholesky": (tf.linalg.cholesky, _spd, lambda x: np.linalg.cholesky(x.astype(np.float64))),
    "MatrixInverse": (tf.linalg.inv, _general, lambda x: np.linalg.inv(x.astype(np.float64))),
    "MatrixInverse-adjoint": (lambda x: tf.linalg.inv(x, adjoint=True), _general,
                              lambda x: np.linalg.inv(np.swapaxes(x.astype(np.float64), -1, -2))),
    "MatrixDeterminant": (tf.linalg.det, _general, lambda x: np.linalg.det(x.astype(np.float64))),
    "LogMatrixDeterminant": (lambda x: tf.linalg.slogdet(x), _general,
                             lambda x: np.linalg.slogdet(x.astype(np.float64))),
}


@pytest.mark.parametrize("case", list(CASES))
def test_square_ops(case):
    fn, make, exact = CASES[case]
    rng = np.random.default_rng(71)
    for batch, n in (((), 5), ((3,), 4), ((2, 1), 7), ((), 1), ((2,), 0)):
        x = make(rng, batch, n)
        got, want, graph = _run(fn, x)
        assert graph.nodes_of_type(case.split("-")[0])
        _check(got, want, list(exact(x)) if case == "LogMatrixDeterminant" else [exact(x)])


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_triangular_solve(lower, adjoint):
    rng = np.random.default_rng(72)
    for mshape, rshape in (((4, 4), (4, 3)), ((2, 5, 5), (1, 5, 2)), ((3, 3), (2, 3, 1)), ((1, 1), (1, 4))):
        m = (rng.standard_normal(mshape) + 3 * np.eye(mshape[-1])).astype(np.float32)
        b = rng.standard_normal(rshape).astype(np.float32)
        got, want, graph = _run(lambda m, b: tf.linalg.triangular_solve(m, b, lower=lower, adjoint=adjoint), m, b)
        assert graph.nodes_of_type("MatrixTriangularSolve")
        a = np.tril(m) if lower else np.triu(m)
        a = np.swapaxes(a, -1, -2) if adjoint else a
        _check(got, want, [np.linalg.solve(a.astype(np.float64), np.broadcast_to(b, got[0].shape).astype(np.float64))])


def test_failures_are_tfs():
    """Not positive definite (or NaN): NaN in the lower triangle, as TF; singular: refused, as TF refuses it."""
    bad = np.array([[[1.0, 2.0], [2.0, 1.0]], [[np.nan, 0.0], [0.0, 1.0]], [[4.0, 9.0], [1.0, 1.0]]], np.float32)
    (got,), (want,), _ = _run(tf.linalg.cholesky, bad)
    # TF leaves a failed matrix's upper triangle uninitialized (zeros here): its lower triangle is what it states
    np.testing.assert_array_equal(np.tril(got), np.tril(want))
    np.testing.assert_array_equal(got[2], want[2])
    assert np.isnan(got[:2]).sum() == 6 and not np.isnan(got[2]).any()
    singular = np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.function(tf.linalg.inv)(singular)
    graph = graph_ir.from_tensorflow(tf.function(tf.linalg.inv), tf.TensorSpec((2, 2), tf.float32))
    session = graph_ir.Session()
    session.add_graph(0, graph)
    with pytest.raises(graph_ir.GraphError, match="MatrixInverse .*not invertible"):
        session.run_graph(0, [singular])
    graph = graph_ir.Graph("g")  # what a hostile file could hold: refused by the builder and the loader alike
    with graph, pytest.raises(graph_ir.GraphError, match="Cholesky 'c': input 'x' must be square matrices"):
        ops.Cholesky(graph_ir.Const(np.zeros((2, 3), np.float32)), name="c")
    with graph, pytest.raises(graph_ir.GraphError, match="MatrixTriangularSolve 's': .*do not broadcast"):
        ops.MatrixTriangularSolve(graph_ir.Const(np.zeros((2, 3, 3), np.float32)),
                                  graph_ir.Const(np.zeros((4, 3, 1), np.float32)), name="s")


def test_log_determinant_and_inverse_losses_train_as_tf(tmp_path):
    """A Gaussian negative log-likelihood with a learned covariance: log det, inverse and their gradients (a
    Cholesky loss needs MatrixBandPart for its gradient as well), 3 steps against TF."""
    rng = np.random.default_rng(73)
    factor = tf.Variable((np.eye(4) + 0.1 * rng.standard_normal((4, 4))).astype(np.float32))

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            cov = factor @ tf.transpose(factor) + tf.constant(0.5 * np.eye(4, dtype=np.float32))
            _, logdet = tf.linalg.slogdet(cov)
            loss = logdet + tf.reduce_mean(tf.einsum("bi,ij,bj->b", x, tf.linalg.inv(cov), x)) + tf.linalg.det(cov)
        factor.assign_sub(0.05 * tape.gradient(loss, factor))
        return loss

    spec = tf.TensorSpec((6, 4), tf.float32)
    _, differences, loss = train_steps.lower_and_compare(step, [spec], lambda k: [rng.standard_normal((6, 4)).astype(np.float32)],
                                                         [factor], str(tmp_path), steps=3)
    assert loss <= 1e-5 and max(differences.values()) <= 1e-5, (loss, differences)
