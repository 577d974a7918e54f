"""GE's Empty (CANN REG_OP, declared in third_party/cann/ge_reg_ops.txt): a new tensor of the Const `shape` and the
attribute's dtype. Executor: zeros (graph_ir/executors/__init__.py); TF mapping: graph_ir/lowering/ops/array.py
(tf.nn.ctc_loss builds its buffers with TF's Empty, init true)."""

from __future__ import annotations

from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import check_shape, const_dims

# The REG_OP's output list, as far as graph_ir holds it (no bfloat16).
EMPTY_DTYPES = ("float32", "float16", "int8", "int16", "uint16", "uint8", "int32", "int64", "bool", "float64")


def _empty(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    dtype = as_dtype(attrs["dtype"])
    if dtype.name not in EMPTY_DTYPES:
        raise GraphError(f"Empty {node!r}: attribute 'dtype' is {dtype.name}; GE's Empty makes {', '.join(EMPTY_DTYPES)}")
    return [TensorDesc("y", dtype, check_shape(node, "shape", const_dims(op, node, inputs[0], "shape")))]


register(IrOp("Empty", (IrInput("shape", ("int32",)),), (IrOutput("y", EMPTY_DTYPES),),
              (IrAttr("dtype", "dtype_int", "int32"), IrAttr("init", "bool", False)), outputs_from="infer",
              infer=_empty, doc="y = a new tensor of `shape` and `dtype`: zeros (with init false, TF leaves it "
                                "uninitialized, so no program can depend on its values; graph_ir gives zeros too)."))
