"""Executors of the ops whose output sizes depend on values (prototypes: graph_ir/opset/valued.py). The Session runs
them between the parts of a graph it plans at known sizes (graph_ir/runtime/segments.py)."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.nodes import Node


def _where(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """The coordinates of x's non-zero elements in row-major order, int64 [count, rank] (TF's where_op.cc; NaN is
    non-zero)."""
    x = args[0]
    return [np.argwhere(x).astype(np.int64, copy=False).reshape(-1, x.ndim)]


EXECUTORS = {"Where": _where}
