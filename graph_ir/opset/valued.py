"""GE ops whose output sizes depend on their input's values (CANN REG_OPs, third_party/cann/ge_reg_ops.txt): Where,
the coordinates of x's non-zero elements. Their output descs are given (output rule "valued": the lowering gives a
probe size, a template -1), and graph_ir.Session runs them between the parts of a graph it plans at each size
(graph_ir/runtime/segments.py). Executor: graph_ir/executors/valued.py; TF mapping: graph_ir/lowering/ops/valued.py."""

from __future__ import annotations

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import ALL_DTYPES, IrInput, IrOp, IrOutput, register


def _where(op: IrOp, node: str, inputs, attrs, given: list[TensorDesc]) -> list[TensorDesc]:
    """y: int64 [count, rank(x)]; the count is given: -1 in a template, a lowering's probe size (which may exceed x's
    elements: it only stands for a size known at run time), or the size a run found."""
    x = inputs[0].desc
    if len(given) != 1:
        raise GraphError(f"Where {node!r}: has {len(given)} output descs, expected 1")
    y = given[0]
    if y.dtype.name != "int64" or len(y.shape) != 2 or y.shape[1] != len(x.shape):
        raise GraphError(f"Where {node!r}: output_desc says {y.dtype}{list(y.shape)}, but the coordinates of x "
                         f"{x.dtype}{list(x.shape)} are int64[count, {len(x.shape)}]")
    if y.shape[0] < -1:
        raise GraphError(f"Where {node!r}: output_desc says {list(y.shape)}; the count is >= 0, or -1")
    return [y.renamed("y")]


register(IrOp("Where", (IrInput("x", ALL_DTYPES),), (IrOutput("y", ("int64",)),), outputs_from="valued",
              infer=_where, doc="y = the coordinates of x's non-zero elements, in row-major order: int64 [count, "
                                "rank(x)], the count known only from x's values (tf.where with one argument)."))
