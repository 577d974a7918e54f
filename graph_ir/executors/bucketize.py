"""Bucketize's executor (prototype: graph_ir/opset/bucketize.py), as TF's kernel (bucketize_op.cc): std::upper_bound
of x among the float32 boundaries, compared as C++ compares them (an integer x converted to float32, a float64 x
against the boundaries widened), so the first boundary above x is its bucket and NaN, above none, is in the last."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.nodes import Node


def _bucketize(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x = args[0]
    boundaries = np.asarray(node.attrs["boundaries"], np.float32)  # TF's attribute is list(float)
    values = x.astype(np.float32) if x.dtype.kind == "i" else x
    buckets = np.searchsorted(boundaries.astype(values.dtype), values, side="right")
    buckets = np.where(np.isnan(values), boundaries.size, buckets)
    return [buckets.astype(node.output_descs[0].dtype.numpy)]


EXECUTORS = {"Bucketize": _bucketize}
