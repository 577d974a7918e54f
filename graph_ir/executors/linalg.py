"""The linear-algebra family's executors (prototypes: graph_ir/opset/linalg.py). Each matrix is factored in float64
and the result rounded once to the input's dtype, so it is at least as close to the exact value as TF's float32
Eigen kernels (tensorflow/core/kernels/linalg/*: LLT, PartialPivLU, triangular solves); the tolerance against TF is
theirs (1e-5 of the output's scale on well-conditioned matrices). Failures are TF's: Cholesky of a matrix that is not
positive definite gives NaN, the inverse of a singular one is a GraphError naming the node, and a triangular solve
divides by the diagonal as Eigen does (a zero gives inf or NaN)."""

from __future__ import annotations

import math

import numpy as np

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Node


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64)


def _cholesky(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """A matrix whose factorization fails (not positive definite, NaN) gives NaN in its lower triangle and zeros
    above, as TF's kernel gives it (no error since TF 2.x)."""
    x = _wide(args[0])
    symmetric = np.tril(x) + np.swapaxes(np.tril(x, -1), -1, -2)  # TF's kernel reads the lower triangle only
    flat = symmetric.reshape(math.prod(x.shape[:-2]), *x.shape[-2:])
    y = np.zeros_like(flat)
    failed = np.tril(np.full(x.shape[-2:], np.nan))
    for k, matrix in enumerate(flat):
        try:
            y[k] = np.linalg.cholesky(matrix) if np.isfinite(matrix).all() else failed
        except np.linalg.LinAlgError:
            y[k] = failed
    return [y.reshape(x.shape).astype(args[0].dtype)]


def _inverse(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x = _wide(args[0])
    if node.attrs["adjoint"]:
        x = np.swapaxes(x, -1, -2)
    try:
        y = np.linalg.inv(x) if x.size else x
    except np.linalg.LinAlgError:
        raise GraphError(f"MatrixInverse {node.name!r}: Input is not invertible (TF's kernel refuses it too)") from None
    return [y.astype(args[0].dtype)]


def _determinant(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x = _wide(args[0])
    sign, log_abs = np.linalg.slogdet(x) if x.shape[-1] else (np.ones(x.shape[:-2]), np.zeros(x.shape[:-2]))
    dtype = args[0].dtype
    if node.type == "LogMatrixDeterminant":
        return [sign.astype(dtype), log_abs.astype(dtype)]
    with np.errstate(over="ignore"):
        return [(sign * np.exp(log_abs)).astype(dtype)]


def _triangular_solve(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """Substitution row by row, vectorized over the batch and rhs columns, in float64."""
    matrix, rhs = _wide(args[0]), _wide(args[1])
    a = np.tril(matrix) if node.attrs["lower"] else np.triu(matrix)
    lower = node.attrs["lower"]
    if node.attrs["adjoint"]:
        a, lower = np.swapaxes(a, -1, -2), not lower
    shape = node.output_descs[0].shape
    a = np.broadcast_to(a, (*shape[:-2], a.shape[-2], a.shape[-1]))
    b = np.broadcast_to(rhs, shape)
    y = np.zeros(shape)
    n = shape[-2]
    with np.errstate(all="ignore"):
        for i in (range(n) if lower else range(n - 1, -1, -1)):
            done = slice(0, i) if lower else slice(i + 1, n)
            known = np.einsum("...j,...jk->...k", a[..., i, done], y[..., done, :])
            y[..., i, :] = (b[..., i, :] - known) / a[..., i, i][..., None]
    return [y.astype(args[0].dtype)]


EXECUTORS = {"Cholesky": _cholesky, "MatrixInverse": _inverse, "MatrixDeterminant": _determinant,
             "LogMatrixDeterminant": _determinant, "MatrixTriangularSolve": _triangular_solve}
