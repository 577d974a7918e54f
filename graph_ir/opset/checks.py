"""The checks family's GE prototypes (CANN REG_OPs, declared in third_party/cann/ge_reg_ops.txt): CheckNumerics, which
passes x through and stops the run when x holds a NaN or an infinity. Executor: graph_ir/executors/checks.py; TF
mapping: graph_ir/lowering/ops/checks.py."""

from __future__ import annotations

from graph_ir.registry import IrAttr, IrInput, IrOp, IrOutput, register

_FLOATING = ("float16", "float32", "float64")  # CheckNumerics's REG_OP: DT_FLOAT16, DT_FLOAT, DT_DOUBLE

register(IrOp("CheckNumerics", (IrInput("x", _FLOATING),), (IrOutput("y", _FLOATING),),
              (IrAttr("message", "string", required=True),), outputs_from="same",
              doc="y = x; a NaN or infinity in x stops the run with `message`."))
