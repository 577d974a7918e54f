"""The linear-algebra family's GE prototypes (CANN REG_OPs, declared in third_party/cann/ge_reg_ops.txt): Cholesky,
MatrixTriangularSolve, MatrixInverse, MatrixDeterminant and LogMatrixDeterminant on batches of square matrices (the
last two axes). Executors: graph_ir/executors/linalg.py; TF mappings: graph_ir/lowering/ops/linalg.py."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import IrAttr, IrInput, IrOp, IrOutput, register

_FLOATS = ("float32", "float64")  # the REG_OPs' real types (Cholesky also declares float16, which TF's kernel lacks)


def _square(op: IrOp, node: str, x: TensorDesc, what: str = "x") -> tuple[int, ...]:
    if len(x.shape) < 2 or x.shape[-1] != x.shape[-2]:
        raise GraphError(f"{op.type} {node!r}: input {what!r} must be square matrices [..., M, M], got shape "
                         f"{list(x.shape)}")
    return x.shape


def _same(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    return [TensorDesc(op.outputs[0].name, inputs[0].dtype, _square(op, node, inputs[0]))]


def _determinant(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    batch = _square(op, node, inputs[0])[:-2]
    return [TensorDesc(o.name, inputs[0].dtype, batch) for o in op.outputs]


def _solve(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    matrix, rhs = inputs
    m = _square(op, node, matrix, "matrix")
    if len(rhs.shape) < 2 or rhs.shape[-2] != m[-1]:
        raise GraphError(f"{op.type} {node!r}: rhs must be [..., {m[-1]}, K] for matrix {list(m)}, got "
                         f"{list(rhs.shape)}")
    try:  # batch dims broadcast, as TF's kernel does
        batch = np.broadcast_shapes(m[:-2], rhs.shape[:-2])
    except ValueError:
        raise GraphError(f"{op.type} {node!r}: the batch dims of matrix {list(m)} and rhs {list(rhs.shape)} do not "
                         "broadcast") from None
    return [TensorDesc("y", matrix.dtype, (*batch, *rhs.shape[-2:]))]


_ADJOINT = IrAttr("adjoint", "bool", False)
for _op in (
    IrOp("Cholesky", (IrInput("x", _FLOATS),), (IrOutput("y", _FLOATS),), outputs_from="infer", infer=_same,
         doc="y = the lower Cholesky factor L of each x = L L^T (only x's lower triangle is read)."),
    IrOp("MatrixInverse", (IrInput("x", _FLOATS),), (IrOutput("y", _FLOATS),), (_ADJOINT,), outputs_from="infer",
         infer=_same, doc="y = the inverse of each x (of its adjoint with `adjoint`); a singular x is an error."),
    IrOp("MatrixDeterminant", (IrInput("x", _FLOATS),), (IrOutput("y", _FLOATS),), outputs_from="infer",
         infer=_determinant, doc="y = the determinant of each x."),
    IrOp("LogMatrixDeterminant", (IrInput("x", _FLOATS),), (IrOutput("sign", _FLOATS), IrOutput("y", _FLOATS)),
         outputs_from="infer", infer=_determinant, doc="sign, y = the sign and log |det| of each x."),
    IrOp("MatrixTriangularSolve", (IrInput("matrix", _FLOATS), IrInput("rhs", _FLOATS)), (IrOutput("y", _FLOATS),),
         (IrAttr("lower", "bool", True), _ADJOINT), outputs_from="infer", infer=_solve, same_dtype=("matrix", "rhs"),
         doc="y solves matrix y = rhs (matrix^H y = rhs with `adjoint`) by substitution on the lower or upper "
             "triangle of matrix; batch dims broadcast."),
):
    register(_op)
