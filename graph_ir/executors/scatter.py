"""The scatter family's executors (prototypes: graph_ir/opset/scatter.py), as TF's CPU kernel (scatter_nd_op.cc,
UpdateOp ADD/SUB/MAX/MIN): a copy of x, then each update slice combined into its row in index order, so repeated
indices add in order and NaN behaves as Eigen's cwiseMax / cwiseMin of (output, update): `out < u ? u : out` and
`u < out ? u : out` (a NaN update is passed over, a NaN output stays)."""

from __future__ import annotations

import math

import numpy as np

from graph_ir.executors.segment import fold_in_order
from graph_ir.executors.slicing import index_rows
from graph_ir.ir.nodes import Node

_COMBINE = {"TensorScatterMax": lambda u, out: np.where(out < u, u, out),
            "TensorScatterMin": lambda u, out: np.where(u < out, u, out)}


def _tensor_scatter(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, indices, updates = args
    depth = indices.shape[-1]
    out = np.array(x, copy=True).reshape(math.prod(x.shape[:depth]), math.prod(x.shape[depth:]))
    rows = index_rows(node, indices, x.shape, "x")
    values = updates.reshape(rows.size, out.shape[1])
    with np.errstate(all="ignore"):
        if node.type == "TensorScatterAdd":
            np.add.at(out, rows, values)
        elif node.type == "TensorScatterSub":
            np.subtract.at(out, rows, values)
        else:
            fold_in_order(out, rows, values, _COMBINE[node.type])
    return [out.reshape(x.shape)]


EXECUTORS = {t: _tensor_scatter for t in ("TensorScatterAdd", "TensorScatterSub", "TensorScatterMax",
                                          "TensorScatterMin")}
