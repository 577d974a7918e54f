"""GE's Bucketize (CANN REG_OP, declared in third_party/cann/ge_reg_ops.txt): the bucket of each element among sorted
`boundaries`. Executor: graph_ir/executors/bucketize.py; TF mapping: graph_ir/lowering/ops/bucketize.py."""

from __future__ import annotations

import itertools

import numpy as np

from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import IrAttr, IrInput, IrOp, IrOutput, register


def _bucketize(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    boundaries = attrs["boundaries"]
    if any(np.isnan(b) for b in boundaries) or any(a > b for a, b in itertools.pairwise(boundaries)):
        raise GraphError(f"Bucketize {node!r}: attribute 'boundaries' must be sorted, got "
                         f"{boundaries[:8]}")  # TF refuses unsorted boundaries too
    dtype = as_dtype(attrs["dtype"])
    if dtype.name not in ("int32", "int64"):
        raise GraphError(f"Bucketize {node!r}: attribute 'dtype' is {dtype.name}; GE's Bucketize gives int32 or int64")
    if not attrs["right"]:
        raise GraphError(f"Bucketize {node!r}: attribute 'right' is false; graph_ir takes TF's buckets [b[i-1], b[i]) "
                         "(right true)")
    return [TensorDesc("y", dtype, inputs[0].shape)]


register(IrOp("Bucketize", (IrInput("x", ("int32", "int64", "float64", "float32")),),
              (IrOutput("y", ("int32", "int64")),),
              (IrAttr("boundaries", "list_float", required=True), IrAttr("dtype", "type", "int32"),
               IrAttr("right", "bool", True)), outputs_from="infer", infer=_bucketize,
              doc="y = the index i with boundaries[i-1] <= x < boundaries[i] (0 below the first, len above the last)."))
