"""graph_ir.lowering (imported by graph_ir.from_tensorflow on first use; it imports TensorFlow): lowers a TF graph with PowerSign / FusedEmaAdam updates to a GE graph.

The lowering table (graph_ir/lowering/table.py) maps TF op types to GE ops declaratively: the GE type, the TF inputs in GE IR order,
which TF inputs become GE attributes (FusedEmaAdam's lr, which must then be a constant), and the TF attributes
kept. It is built from op_spec, so it agrees with the TF registrations and the GE prototypes.
The plumbing around the updates lowers as TensorFlow's own GE adapter does it:

- A resource variable (a captured handle of a tf.function, or a VarHandleOp / VariableV2 in a tf.Graph or GraphDef)
  becomes a GE Variable with the variable's dtype and shape. It is named like the TF variable without ":0" and
  holds its current value in `value`. For a graph it is the constant its initializer assigns.
- ReadVariableOp and Identity become Identity. NoOp disappears and its control edges pass through. Const stays
  Const, and Cast stays Cast.
- Function arguments (and the Placeholders of a graph, in order) become Data nodes, by position.
- The function's outputs go to NetOutput. The updates are also NetOutput's control inputs, so nothing is pruned.

Scalar policy: a rank-0 TF tensor feeding a scalar input of a GE op (lr, logbase, sign_decay, beta, step) is
lowered with shape [1], as in CANN's GE-IR samples. Every other tensor keeps its TF shape (a scalar variable stays
[]). Any TF op not in the table and not plumbing is named in a LoweringError.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from graph_ir.errors import LoweringError
from graph_ir.graph import Graph
from graph_ir.lowering.capture import graph_variables, variable_owning
from graph_ir.lowering.lowerer import Lowerer
from graph_ir.lowering.table import LOWERINGS

__all__ = ["LOWERINGS", "LoweringError", "from_tensorflow"]


def from_tensorflow(fn: Any, *args: Any) -> Graph:
    """Lowers a TF graph to a GE graph (see the module docstring for the rules).

    Args:
      fn: a tf.function (traced with `args`: tensors or tf.TensorSpecs), a ConcreteFunction, a tf.Graph or a
        GraphDef.
      *args: the arguments to trace a tf.function with.
    Returns:
      a verified graph_ir.Graph.
    Raises:
      LoweringError: naming the TF node that cannot be lowered, or why (e.g. a non-constant FusedEmaAdam lr).
    """
    is_function = hasattr(fn, "get_concrete_function") or (hasattr(fn, "graph") and hasattr(fn, "captured_inputs"))
    if not (is_function or isinstance(fn, (tf.Graph, tf.compat.v1.GraphDef))):
        raise TypeError(f"from_tensorflow takes a tf.function, a ConcreteFunction, a tf.Graph or a GraphDef, got "
                        f"{type(fn).__name__}")
    if hasattr(fn, "get_concrete_function") and not isinstance(fn, tf.Graph):
        fn = fn.get_concrete_function(*args)
    elif args:
        raise TypeError("arguments are only used to trace a tf.function")
    if hasattr(fn, "graph") and hasattr(fn, "captured_inputs"):  # a ConcreteFunction
        func_graph = fn.graph
        graph_def = func_graph.as_graph_def()
        by_handle = {id(v.handle): v for v in func_graph.variables}
        variables, captured = {}, set()
        for external, internal in func_graph.captures:
            captured.add(internal.op.name)
            var = by_handle.get(id(external))
            if var is None:
                var = variable_owning(external)
            if var is not None:
                variables[internal.op.name] = (var.name.split(":")[0], np.array(var.numpy(), copy=True))
            elif internal.dtype == tf.resource:
                raise LoweringError(f"captured resource {internal.op.name!r} is not a tf.Variable of the function")
        args_order = [t.op.name for t in func_graph.inputs if t.op.name not in captured]
        outputs = [t.name for t in func_graph.outputs if t.dtype != tf.resource]
        name = func_graph.name
    else:
        graph_def = fn.as_graph_def() if isinstance(fn, tf.Graph) else fn
        variables = graph_variables(graph_def)
        args_order = [n.name for n in graph_def.node if n.op == "Placeholder"]
        outputs, name = [], "graph"
    return Lowerer(graph_def, name, args_order, variables, outputs).run()
