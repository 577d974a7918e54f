"""The scatter family's executors (prototypes: graph_ir/opset/scatter.py), as TF's CPU kernel (scatter_nd_op.cc,
UpdateOp ADD/SUB/MAX/MIN): a copy of x, then each update slice combined into its row in index order, so repeated
indices add in order and NaN behaves as Eigen's cwiseMax / cwiseMin of (output, update): `out < u ? u : out` and
`u < out ? u : out` (a NaN update is passed over, a NaN output stays). ScatterAdd, ScatterSub and ScatterUpdate
write rows of the Variable in place, each index in order, as TF's scatter functor (scatter_functor.h) on the CPU; all
indices are checked before the first row is written."""

from __future__ import annotations

import math

import numpy as np

from graph_ir.executors.segment import fold_in_order
from graph_ir.executors.slicing import index_rows
from graph_ir.ir.errors import GraphError
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


def _scatter_rows(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    var, indices, updates = args
    rows = indices.reshape(-1).astype(np.int64)
    bad = (rows < 0) | (rows >= var.shape[0])
    if bad.any():
        k = int(np.argmax(bad))
        raise GraphError(f"{node.type} {node.name!r}: indices[{k}] = {int(rows[k])} is not in [0, {var.shape[0]}) "
                         "(var's rows); nothing was written")
    table = var.reshape(var.shape[0], math.prod(var.shape[1:]))
    values = updates.reshape(rows.size, table.shape[1])
    with np.errstate(all="ignore"):
        if node.type == "ScatterAdd":
            np.add.at(table, rows, values)
        elif node.type == "ScatterSub":
            np.subtract.at(table, rows, values)
        else:
            _, from_end = np.unique(rows[::-1], return_index=True)
            last = rows.size - 1 - from_end  # of repeated indices the last wins, as in TF's loop
            table[rows[last]] = values[last]
    return [var]


EXECUTORS = {"ScatterAdd": _scatter_rows, "ScatterSub": _scatter_rows, "ScatterUpdate": _scatter_rows}
EXECUTORS |= {t: _tensor_scatter for t in ("TensorScatterAdd", "TensorScatterSub", "TensorScatterMax",
                                          "TensorScatterMin")}
