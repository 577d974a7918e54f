"""Where a TF graph's variables come from, what they hold, and what they are called in GE.

Naming rule (Graph.variable_name tells it): a TF variable's GE Variable is named like the TF variable without
":0" ("dense/kernel", "iterations"); when another TF variable already has that GE name in this process, it gets
"_1", "_2", ... Names are handed out once per process and kept, so two different TF variables never share a GE
Variable (in one graph, or across the graphs of one Session), and one TF variable lowered twice keeps its name.
"""

from __future__ import annotations

import gc
import threading
from typing import Any

import numpy as np
import tensorflow as tf

from graph_ir.ir.errors import LoweringError

_NAMES: dict[Any, str] = {}  # variable key -> GE name
_TAKEN: set[str] = set()
_LOCK = threading.Lock()


def attr_value(node_def, name: str):
    value = node_def.attr[name]
    return getattr(value, value.WhichOneof("value"))


def parse_tensor(tensor: str) -> tuple[str, int]:
    """A TF tensor or control input ("name:1", "^name") as (node name, output index)."""
    name, _, index = tensor.lstrip("^").partition(":")
    return name, int(index or 0)


def ge_name(key: Any, tf_name: str) -> str:
    """The GE Variable name of the variable `key` (see the module docstring)."""
    base = tf_name.split(":")[0].replace(":", "_") or "Variable"
    with _LOCK:
        if key not in _NAMES:
            name, k = base, 0
            while name in _TAKEN:
                k += 1
                name = f"{base}_{k}"
            _NAMES[key] = name
            _TAKEN.add(name)
        return _NAMES[key]


def variable_key(var: tf.Variable) -> Any:
    return ("eager", getattr(var, "_unique_id", None) or id(var))


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


def _is_table(handle) -> bool:
    """Whether a captured resource is a tf.lookup table: read by LookupTable ops (directly, or through Identity)."""
    seen, todo = set(), [handle]
    while todo:
        tensor = todo.pop()
        for consumer in tensor.consumers():
            if consumer.type.startswith("LookupTable"):
                return True
            if consumer.type == "Identity" and consumer.name not in seen:
                seen.add(consumer.name)
                todo.extend(consumer.outputs)
    return False


def function_variables(func_graph) -> tuple[dict[str, tuple[str, np.ndarray, Any]], set[str],
                                            dict[str, np.ndarray]]:
    """The captured variables of a traced function: {placeholder name: (GE name, current value, tf.Variable)}, the
    names of all capture placeholders, and the captured constant tensors {placeholder name: value}.

    TF embeds a small captured eager tensor as a Const, but captures a larger one (more than 128 elements; TF's
    _EAGER_CONST_THRESHOLD in tensorflow/python/framework/func_graph.py) as a Placeholder fed from the closure. Such a
    tensor is a constant of the step (a weight-like table: Swin's relative-position index), of any size: it becomes
    a GE Const holding its value, not folded further (graph_ir/lowering/context.py folds only small inputs)."""
    by_handle = {id(v.handle): v for v in func_graph.variables}
    variables, captured, constants = {}, set(), {}
    for external, internal in func_graph.captures:
        captured.add(internal.op.name)
        var = by_handle.get(id(external))
        if var is None:
            var = variable_owning(external)
        if var is not None:
            value = np.array(var.numpy(), copy=True)
            variables[internal.op.name] = (ge_name(variable_key(var), var.name), value, var)
        elif internal.dtype == tf.resource and _is_table(internal):
            continue  # its LookupTable ops are refused by name, with the way out (graph_ir/lowering/ops)
        elif internal.dtype == tf.resource:
            raise LoweringError(f"captured resource {internal.op.name!r} is not a tf.Variable of the function")
        elif internal.dtype != tf.variant and isinstance(external, tf.__internal__.EagerTensor):  # a fixed value
            constants[internal.op.name] = np.array(external.numpy(), copy=True)
    return variables, captured, constants


def graph_variables(graph, graph_def, closure: set[str], session,
                    source: Any = None) -> dict[str, tuple[str, np.ndarray, Any]]:
    """The variables a tf.Graph's fetches use: {VarHandleOp/VariableV2 name: (GE name, value, variable or None)}.
    `source` is the graph or GraphDef the user gave (whose identity keeps the GE names), when `graph_def` is a copy.

    Values come from `session` when given; otherwise from the variable's own initializer when that is a constant;
    otherwise a LoweringError. Never from another Assign of the graph."""
    nodes = {n.name: n for n in graph_def.node}
    objects = {}
    if graph is not None:
        for var in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES) + \
                graph.get_collection(tf.compat.v1.GraphKeys.LOCAL_VARIABLES):
            objects[var.op.name] = var
    out = {}
    for name in sorted(closure):
        node = nodes[name]
        if node.op not in ("VarHandleOp", "VariableV2"):
            continue
        var = objects.get(name)
        shared = attr_value(node, "shared_name").decode() if node.op == "VarHandleOp" else ""
        key = ("graph", id(source if source is not None else graph if graph is not None else graph_def),
               shared or name)
        if session is not None:
            if var is None:
                raise LoweringError(f"{node.op} {name!r}: the graph has no variable object for it, so the session "
                                    "cannot be asked for its value; pass the tf.Graph (not a GraphDef)")
            value = session.run(var._graph_element if hasattr(var, "_graph_element") else var)
        else:
            value = _initial_value(nodes, name, var)
        out[name] = (ge_name(key, shared or name), np.array(value, copy=True), var)
    return out


def _initial_value(nodes: dict, name: str, var) -> np.ndarray:
    """The constant the variable's own initializer assigns (its `initializer` op, or TF's "<name>/Assign")."""
    init_name = var.initializer.name if var is not None else f"{name}/Assign"
    init = nodes.get(init_name)
    if init is None or init.op not in ("AssignVariableOp", "Assign"):
        raise LoweringError(f"variable {name!r}: no initializer {init_name!r} in the graph; pass session= (a "
                            "tf.compat.v1.Session holding the variables) to lower with their current values")
    source = nodes.get(init.input[1].partition(":")[0])
    while source is not None and source.op == "Identity":
        source = nodes.get(source.input[0].partition(":")[0])
    if source is None or source.op != "Const":
        raise LoweringError(f"variable {name!r}: its initializer {init_name!r} is not a constant (it comes from "
                            f"{source.op if source is not None else 'nothing'}); pass session= (a "
                            "tf.compat.v1.Session holding the variables) to lower with their current values")
    return tf.make_ndarray(source.attr["value"].tensor)
