"""The linear-algebra family's TF -> GE mappings (prototypes: graph_ir/opset/linalg.py): tf.linalg.cholesky, inv,
det, slogdet and triangular_solve onto the GE ops of the same names, with TF's adjoint and lower attributes."""

from __future__ import annotations

from graph_ir.lowering.ops.common import same

LOWERINGS = {
    "Cholesky": same("Cholesky"),
    "MatrixInverse": same("MatrixInverse", adjoint="adjoint"),
    "MatrixDeterminant": same("MatrixDeterminant"),
    "LogMatrixDeterminant": same("LogMatrixDeterminant"),
    "MatrixTriangularSolve": same("MatrixTriangularSolve", lower="lower", adjoint="adjoint"),
}
