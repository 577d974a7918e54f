"""The trigonometric family's GE prototypes, as CANN's REG_OPs declare them (third_party/cann/ge_reg_ops.txt;
hicann/ops-math math/*/op_graph/*_proto.h): the inverse functions Acos, Asin, Atan, Atan2 and Tan, the hyperbolic
Sinh, Cosh and their inverses Asinh, Acosh, Atanh. dtypes: CANN's float lists (graph_ir allows fewer, never more: the
integer and complex dtypes some of them declare are left out, since TF's float ops are what lowers onto them).
Executors: graph_ir/executors/trig.py; TF mappings: graph_ir/lowering/ops/trig.py."""

from __future__ import annotations

from graph_ir.ir.registry import FLOATS, IrInput, IrOp, IrOutput, register
from graph_ir.opset.math import FLOATING  # CANN's FloatingDataType, and the float part of the older explicit lists

# type -> dtypes. Acos, Asin and Tan declare {f16, f32, f64, i32, i64, complex} (no bfloat16); the others
# UnaryDataType (f16, bf16, f32, f64, complex).
_UNARY = {"Acos": FLOATING, "Asin": FLOATING, "Tan": FLOATING, "Atan": FLOATS, "Sinh": FLOATS, "Cosh": FLOATS,
          "Asinh": FLOATS, "Acosh": FLOATS, "Atanh": FLOATS}

for _type, _dtypes in _UNARY.items():
    register(IrOp(_type, (IrInput("x", _dtypes),), (IrOutput("y", _dtypes),), outputs_from="same",
                  doc=f"y = {_type.lower()}(x), elementwise."))
register(IrOp("Atan2", (IrInput("x1", FLOATING), IrInput("x2", FLOATING)), (IrOutput("y", FLOATING),),
              outputs_from="broadcast", same_dtype=("x1", "x2"),
              doc="y = atan2(x1, x2): the angle of the point (x2, x1), in [-pi, pi], broadcast."))
