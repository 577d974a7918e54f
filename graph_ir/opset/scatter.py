"""The scatter family's GE prototypes (CANN REG_OPs, declared in third_party/cann/ge_reg_ops.txt): TensorScatterAdd,
TensorScatterSub, TensorScatterMax and TensorScatterMin, x with each update slice combined into it at its index
(TensorScatterUpdate is graph_ir/opset/slicing.py's); ScatterAdd, ScatterSub and ScatterUpdate, the same on rows of a
Variable, in place (TF's ResourceScatterAdd/Sub/Update: the sparse updates of Keras's optimizers). Executors: graph_ir/executors/scatter.py; TF mappings:
graph_ir/lowering/ops/scatter.py."""

from __future__ import annotations

from graph_ir.ir.errors import GraphError
from graph_ir.ir.registry import ALL_DTYPES, INDICES, IrAttr, IrInput, IrOp, IrOutput, register
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


def check_row_updates(op: IrOp, node: str, inputs) -> None:
    """updates' shape is indices' shape followed by var's rows' shape (TF's scatter_op.cc, ScatterUpdateOp), where
    both are known (-1 in a template is a size known only at run time)."""
    var, indices, updates = (h.desc for h in inputs)
    if not var.shape:
        raise GraphError(f"{op.type} {node!r}: var must have rank >= 1 (rows to update), got a scalar")
    want = (*indices.shape, *var.shape[1:])
    if len(updates.shape) != len(want) or any(u != w and u >= 0 and w >= 0 for u, w in zip(updates.shape, want)):
        raise GraphError(f"{op.type} {node!r}: updates has shape {list(updates.shape)}, but indices "
                         f"{list(indices.shape)} and var {list(var.shape)} need {list(want)} (indices.shape + "
                         "var.shape[1:])")


def _rows(op: IrOp, node: str, inputs, attrs):
    check_row_updates(op, node, inputs)
    return [inputs[0].desc.renamed("var")]


for _type, _how in (("ScatterAdd", "+="), ("ScatterSub", "-="), ("ScatterUpdate", "=")):
    register(IrOp(_type, (IrInput("var", _ADD_SUB), IrInput("indices", INDICES), IrInput("updates", _ADD_SUB)),
                  (IrOutput("var", _ADD_SUB),), (IrAttr("use_locking", "bool", False),), outputs_from="infer",
                  infer=_rows, same_dtype=("var", "updates"),
                  doc=f"var[indices[i]] {_how} updates[i] for each index i in order, in place (an index out of range "
                      "is an error before any row is written, as on TF's CPU)."))
