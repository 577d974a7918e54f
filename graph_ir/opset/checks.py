"""The checks family's GE prototypes (CANN REG_OPs, declared in third_party/cann/ge_reg_ops.txt): CheckNumerics, which
passes x through and stops the run when x holds a NaN or an infinity; Assert, whose condition graph_ir checks when
the graph is built: it must be known then (a Const, or a value computed from static shapes), so that a false one
refuses the graph, or a template's call at shapes where it fails (graph_ir/dynamic), before anything runs. Executor:
graph_ir/executors/checks.py; TF mapping: graph_ir/lowering/ops/checks.py."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import GraphError
from graph_ir.ir.registry import IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import known_or_none

_FLOATING = ("float16", "float32", "float64")  # CheckNumerics's REG_OP: DT_FLOAT16, DT_FLOAT, DT_DOUBLE

register(IrOp("CheckNumerics", (IrInput("x", _FLOATING),), (IrOutput("y", _FLOATING),),
              (IrAttr("message", "string", required=True),), outputs_from="same",
              doc="y = x; a NaN or infinity in x stops the run with `message`."))


def _assert(op: IrOp, node: str, inputs, attrs) -> list:
    value = known_or_none(inputs[0])
    if value is None:
        raise GraphError(f"Assert {node!r}: its condition is computed from the step's data; graph_ir checks an Assert "
                         "when the graph is built, so its condition must be known then (from static shapes)")
    if not np.all(value):
        raise GraphError(f"Assert {node!r}: its condition is false at these shapes (TF refuses such a step with "
                         "InvalidArgumentError)")
    return []


_DATA = ("float32", "float16", "int8", "int16", "uint16", "uint8", "int32", "int64", "uint32", "uint64", "bool",
         "float64")  # Assert's REG_OP, less DT_STRING (graph_ir holds no strings)
register(IrOp("Assert", (IrInput("input_condition", ("bool",)), IrInput("input_data", _DATA, dynamic=True)), (),
              (IrAttr("summarize", "int", 3),), outputs_from="infer", infer=_assert,
              doc="Stops the run when input_condition is false; graph_ir checks it when the graph is built."))
