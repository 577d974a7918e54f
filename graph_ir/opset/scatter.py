"""The scatter family's GE prototypes (CANN REG_OPs, declared in third_party/cann/ge_reg_ops.txt): TensorScatterAdd,
TensorScatterSub, TensorScatterMax and TensorScatterMin, x with each update slice combined into it at its index
(TensorScatterUpdate is graph_ir/opset/slicing.py's). Executors: graph_ir/executors/scatter.py; TF mappings:
graph_ir/lowering/ops/scatter.py."""

from __future__ import annotations

from graph_ir.ir.registry import ALL_DTYPES, INDICES, IrInput, IrOp, IrOutput, register
from graph_ir.opset.slicing import tensor_scatter

_ADD_SUB = ("float16", "float32", "int32", "int8", "uint8")  # the REG_OPs' list
_BASIC = tuple(d for d in ALL_DTYPES if d != "bool")  # CANN's BasicType, as far as graph_ir holds it

for _type, _x, _y, _dtypes, _how in (("TensorScatterAdd", "x", "y", _ADD_SUB, "added to"),
                                     ("TensorScatterSub", "x", "y", _ADD_SUB, "subtracted from"),
                                     ("TensorScatterMax", "input", "output", _BASIC, "the larger of it and"),
                                     ("TensorScatterMin", "input", "output", _BASIC, "the smaller of it and")):
    register(IrOp(_type, (IrInput(_x, _dtypes), IrInput("indices", INDICES), IrInput("updates", _dtypes)),
                  (IrOutput(_y, _dtypes),), outputs_from="infer", infer=tensor_scatter, same_dtype=(_x, "updates"),
                  doc=f"{_y} = {_x} with each update slice {_how} the slice at its index, in index order (an index "
                      "out of range is an error, as on TF's CPU)."))
