"""What a TF graph captures: the variables behind its resource inputs and their current values."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import tensorflow as tf


def attr_value(node_def, name: str):
    value = node_def.attr[name]
    return getattr(value, value.WhichOneof("value"))


def graph_variables(graph_def) -> dict[str, Any]:
    """VarHandleOp / VariableV2 nodes with a constant initializer (AssignVariableOp / Assign of a Const)."""
    nodes = {n.name: n for n in graph_def.node}
    out = {}
    for node in graph_def.node:
        if node.op not in ("AssignVariableOp", "Assign"):
            continue
        target, value = (t.partition(":")[0] for t in node.input[:2])
        source = nodes.get(value)
        while source is not None and source.op == "Identity":
            source = nodes.get(source.input[0].partition(":")[0])
        if nodes.get(target) is not None and nodes[target].op in ("VarHandleOp", "VariableV2") and \
                source is not None and source.op == "Const":
            var = nodes[target]
            name = attr_value(var, "shared_name").decode() if var.op == "VarHandleOp" and \
                attr_value(var, "shared_name") else var.name
            out[target] = (name, np.ascontiguousarray(tf.make_ndarray(source.attr["value"].tensor)))
    return out


def variable_owning(handle) -> tf.Variable | None:
    """The tf.Variable whose handle a function captured, when it was passed as `v.handle` (so the function graph
    did not record the variable itself): found among the objects that refer to the handle."""
    if getattr(handle, "dtype", None) != tf.resource:
        return None
    for referrer in gc.get_referrers(handle):
        if isinstance(referrer, tf.Variable) and getattr(referrer, "_handle", None) is handle:
            return referrer
        if isinstance(referrer, dict):  # an instance __dict__ (before Python 3.11's inline dicts)
            for owner in gc.get_referrers(referrer):
                if isinstance(owner, tf.Variable) and getattr(owner, "_handle", None) is handle:
                    return owner
    return None


