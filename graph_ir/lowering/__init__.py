"""graph_ir.lowering (imported by graph_ir.from_tensorflow on first use; it imports TensorFlow): lowers TF training
steps to GE graphs.

- A tf.function (traced with its arguments) or a ConcreteFunction: everything the function runs is lowered: its
  outputs and every stateful op in it (TF runs them all). Captured variables become GE Variables holding their
  current values; arguments become Data nodes by position.
- A tf.Graph or GraphDef with `fetches`: exactly what tf.compat.v1.Session.run(fetches) would run (the fetches and
  what they depend on, data and control). Variable values come from `session` when given, else from each
  variable's own constant initializer, else a LoweringError; never from another Assign of the graph. Placeholders
  that the fetches need become Data nodes, in graph order.

The op mapping is in graph_ir/lowering/table.py, the naming of Variables in graph_ir/lowering/capture.py
(Graph.variable_name(v) gives a variable's GE name). FusedEmaAdam's lr is a GE attribute: a constant, or the current
value of a learning-rate variable the step does not write (lowering again picks up a new value); a learning rate
computed in the step (a schedule) is a LoweringError. Scalar policy: a rank-0 tensor feeding a GE scalar input (lr,
logbase, sign_decay, beta, step) is given shape [1], as in CANN's GE-IR samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from graph_ir.errors import LoweringError
from graph_ir.graph import Graph
from graph_ir.lowering.capture import function_variables, graph_variables
from graph_ir.lowering.lowerer import Lowerer, is_stateful, parse_tensor
from graph_ir.lowering.table import LOWERINGS

__all__ = ["LOWERINGS", "LoweringError", "from_tensorflow"]


def _from_function(fn) -> Graph:
    func_graph = fn.graph
    graph_def = func_graph.as_graph_def()
    variables, captured = function_variables(func_graph)
    args = [t.op.name for t in func_graph.inputs if t.op.name not in captured]
    outputs = [t.name for t in func_graph.outputs if t.dtype != tf.resource]
    must_run = [n.name for n in graph_def.node if is_stateful(n.op) and n.op not in ("Placeholder",)]
    must_run += [op.name for op in getattr(func_graph, "control_outputs", [])]
    return Lowerer(graph_def, func_graph.name, args=args, variables=variables, outputs=outputs,
                   must_run=must_run).run()


def _fetch_names(fetches) -> tuple[list[str], list[str]]:
    """(tensor names to return, op names to run) of Session.run-style fetches."""
    if fetches is None:
        raise TypeError("from_tensorflow(graph, fetches=...): say what Session.run would fetch (ops or tensors)")
    items = fetches if isinstance(fetches, (list, tuple)) else [fetches]
    tensors, ops = [], []
    for item in items:
        if isinstance(item, tf.Operation):
            ops.append(item.name)
        elif isinstance(item, (tf.Tensor, tf.Variable)):
            tensor = item if isinstance(item, tf.Tensor) else item.value()
            tensors.append(tensor.name)
        elif isinstance(item, str):
            (tensors if ":" in item else ops).append(item)
        else:
            raise TypeError(f"fetches: {item!r} is not an op, a tensor or a name")
    return tensors, ops


def _closure(graph_def, roots: list[str]) -> set[str]:
    nodes = {n.name: n for n in graph_def.node}
    seen, stack = set(), list(roots)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        if name not in nodes:
            raise LoweringError(f"fetch or input {name!r} is not a node of the graph")
        seen.add(name)
        stack.extend(parse_tensor(t)[0] for t in nodes[name].input)
    return seen


def _from_graph(source, fetches, session) -> Graph:
    graph = source if isinstance(source, tf.Graph) else None
    graph_def = source.as_graph_def() if graph is not None else source
    tensors, ops = _fetch_names(fetches)
    closure = _closure(graph_def, [parse_tensor(t)[0] for t in tensors] + ops)
    variables = graph_variables(graph, graph_def, closure, session)
    args = [n.name for n in graph_def.node if n.op == "Placeholder" and n.name in closure]
    return Lowerer(graph_def, "graph", args=args, variables=variables, outputs=tensors, must_run=ops).run()


def from_tensorflow(fn: Any, *args: Any, fetches: Sequence | Any = None, session: Any = None) -> Graph:
    """Lowers a TF step to a GE graph (see the module docstring for the rules).

    Args:
      fn: a tf.function (traced with `args`: tensors or tf.TensorSpecs), a ConcreteFunction, a tf.Graph or a
        GraphDef.
      *args: the arguments to trace a tf.function with.
      fetches: for a tf.Graph or GraphDef, what tf.compat.v1.Session.run would fetch (ops, tensors or names).
      session: for a tf.Graph, a tf.compat.v1.Session holding its variables' values.
    Returns:
      a verified graph_ir.Graph.
    Raises:
      LoweringError: naming the TF node that cannot be lowered, or why.
    """
    is_function = hasattr(fn, "get_concrete_function") or (hasattr(fn, "graph") and hasattr(fn, "captured_inputs"))
    if not (is_function or isinstance(fn, (tf.Graph, tf.compat.v1.GraphDef))):
        raise TypeError(f"from_tensorflow takes a tf.function, a ConcreteFunction, a tf.Graph or a GraphDef, got "
                        f"{type(fn).__name__}")
    if is_function:
        if fetches is not None or session is not None:
            raise TypeError("fetches and session are for a tf.Graph or GraphDef; a function lowers what it runs")
        if hasattr(fn, "get_concrete_function"):
            fn = fn.get_concrete_function(*args)
        elif args:
            raise TypeError("arguments are only used to trace a tf.function")
        return _from_function(fn)
    if args:
        raise TypeError("arguments are only used to trace a tf.function")
    return _from_graph(fn, fetches, session)
