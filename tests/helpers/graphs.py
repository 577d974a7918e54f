"""Real GE graphs for the graph_ir tests and the file fuzz suite: built with the builders, as users build them."""

from __future__ import annotations

import numpy as np

import graph_ir
from graph_ir import ops
from graph_ir.ir.dtypes import as_dtype


def power_sign_graph(dtype: str = "float32", n: int = 8) -> graph_ir.Graph:
    """Variables var/m, a Data grad, Const scalars; outputs var and a Cast of m."""
    t = as_dtype(dtype).numpy
    graph = graph_ir.Graph("power_sign")
    with graph:
        var = graph_ir.Variable("w", np.linspace(-1, 1, n).astype(t))
        m = graph_ir.Variable("w_m", np.zeros(n, t))
        grad = graph_ir.Data(0, dtype, (n,), name="grad")
        var_out, m_out = ops.InplaceApplyPowerSign(var, m, 0.1, 1.0, 0.5, 0.9, grad, name="update")
        cast = ops.Cast(m_out, dst_type="float32", name="cast")
        graph.set_outputs([var_out, cast])
    return graph


def fused_ema_adam_graph(dtype: str = "float32", shape: tuple[int, ...] = (2, 3)) -> graph_ir.Graph:
    """ApplyFusedEmaAdam on Variables with a Data grad and an int64 Const step; a Reshape and an Identity after."""
    t = as_dtype(dtype).numpy
    graph = graph_ir.Graph("fused_ema_adam")
    with graph:
        state = [graph_ir.Variable(f"p_{name}", np.full(shape, 0.5 * k, t)) for k, name in enumerate("wmvs")]
        grad = graph_ir.Data(0, dtype, shape, name="grad")
        step = graph_ir.Const(np.array([3], np.int64), name="step")
        out = ops.ApplyFusedEmaAdam(grad, *state, step, lr=0.01, mode=0, weight_decay=0.01, name="fea")
        flat = ops.Reshape(out[0], graph_ir.Const(np.array([-1], np.int64), name="flat_shape"), name="flat")
        snapshot = ops.Identity(out[3], name="snapshot", control_inputs=[out[1]])
        graph.set_outputs([flat, snapshot])
    return graph


def feeds_for(graph: graph_ir.Graph, rng: np.random.Generator, max_elements: int = 1 << 20):
    """Random inputs for the graph's Data/RefData nodes, or None when they would be too large to feed."""
    data = graph.nodes_of_type("Data") + graph.nodes_of_type("RefData")
    count = max((n.attrs["index"] for n in data), default=-1) + 1
    if count > 16 or sum(n.output_descs[0].num_elements for n in data) > max_elements:
        return None
    feeds: list = [np.zeros(0, np.float32)] * count
    for node in data:
        desc = node.output_descs[0]
        feeds[node.attrs["index"]] = rng.standard_normal(desc.shape).astype(desc.dtype.numpy)
    return feeds
