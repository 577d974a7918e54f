"""Constant folding: our session's own arithmetic run while a graph is built. A node whose inputs are all small known
values (shape plumbing such as Prod of a shape, BroadcastGradientArgs, Cast of a count) is executed by graph_ir's
executor for its op, and the shape ops (Shape, ShapeN, Size) need only their input's static shape. The lowering
folds such nodes into Consts (graph_ir/lowering/context.py); so does a template graph's instance at the call's shapes
(graph_ir/dynamic/instance.py), which makes Reshape's shape, Fill's dims and reduction axes the Consts that GE's shape
inference and the planner need."""

from __future__ import annotations

import numpy as np

from graph_ir.executors import EXECUTORS, random
from graph_ir.executors.array import SHAPE_ONLY
from graph_ir.ir.nodes import Handle, Node

FOLD_LIMIT = 4096  # the most elements a folded input or result may have (larger results stay GE nodes)
# snapshots, which keep read-before-write order, and draws from a stream, which differ at every run
NEVER_FOLDED = frozenset({"Identity", "IdentityN"}) | random.STATEFUL


def known_value(handle: Handle) -> np.ndarray | None:
    """The value of a handle known while building: a Const's, or a node's known_values (graph_ir/ir/nodes.py)."""
    node = handle.node
    if node.known_values is not None and node.known_values[handle.index] is not None:
        return node.known_values[handle.index]
    return node.attrs["value"] if node.type == "Const" else None


def fold_values(node: Node) -> list[np.ndarray] | None:
    """The node's output values if they can be computed now (see the module docstring), else None."""
    given = [h for h in node.inputs if h is not None]
    if not node.output_descs:
        return None  # (an Assert: it stays, checked)
    if any(not d.is_static or d.num_elements > FOLD_LIMIT or d.dtype.name in ("complex64", "variant")
           for d in node.output_descs):
        return None  # (complex results stay GE nodes: CANN's Const declares no complex type; a list is no constant)
    if node.type == "TensorListLength":  # the length the list's desc knows (graph_ir/ir/nodes.py ListMeta)
        held = given[0].desc.list_meta
        return None if held is None or held.length is None else [np.asarray(held.length, np.int32)]
    if node.type in SHAPE_ONLY:
        if not all(h.desc.is_static for h in given):
            return None
        args = [None] * len(given)
    else:
        if node.type not in EXECUTORS or node.type in NEVER_FOLDED or node.op.refs or node.subgraph_graphs:
            return None
        args = [known_value(h) for h in given]
        if any(a is None or np.size(a) > FOLD_LIMIT for a in args):
            return None
    values = EXECUTORS[node.type](node, args)
    return [np.asarray(v, dtype=d.dtype.numpy).reshape(d.shape) for v, d in zip(values, node.output_descs)]


def popped_constant(node: Node) -> list[np.ndarray | None] | None:
    """For a TensorListPopBack of a list whose every element is one known value (ListMeta.constant: the shapes
    tf.while_loop's forward loop accumulated for its gradient): its known_values, [None, that value]."""
    held = node.inputs[0].desc.list_meta if node.type == "TensorListPopBack" else None
    if held is None or held.constant is None:
        return None
    dtype, shape, data = held.constant
    return [None, np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape).copy()]


def replace_by_consts(graph, node: Node, values: list[np.ndarray]) -> Node | list[Handle]:
    """Replaces `node`, the last one added to `graph`, by Consts of `values` (its name and control inputs kept);
    returns the Const, or the handles of several."""
    graph.remove_last(node)
    names = [node.name] + [f"{node.name}/output_{k}" for k in range(1, len(values))]
    consts = [graph.add_node("Const", (), {"value": v}, name=n, control_inputs=node.control_inputs,
                             exact_name=k == 0) for k, (n, v) in enumerate(zip(names, values))]
    return consts[0] if len(consts) == 1 else [c.output(0) for c in consts]
