"""graph_ir.lowering (imported by graph_ir.from_tensorflow on first use; it imports TensorFlow): lowers TF training
steps to GE graphs.

- A tf.function (traced with its arguments) or a ConcreteFunction: everything the function runs is lowered: its
  outputs and every stateful op in it (TF runs them all). Captured variables become GE Variables holding their
  current values; arguments become Data nodes by position, except tf.Variable arguments, which become the GE
  Variables they are (graph_ir/lowering/trace.py). Keras's model.train_function lowers as one step of fit on the
  batch specs passed as `args` (graph_ir/lowering/keras_functions.py).
- A tf.Graph or GraphDef with `fetches`: exactly what tf.compat.v1.Session.run(fetches) would run (the fetches and
  what they depend on, data and control). Variable values come from `session` when given, else from each
  variable's own constant initializer, else a LoweringError; never from another Assign of the graph. Placeholders
  that the fetches need become Data nodes, in graph order.

Function calls (nested tf.functions, PartitionedCall / StatefulPartitionedCall) are inlined first
(graph_ir/lowering/inline.py). graph_ir.missing_ops(fn, *args) lists every op that has no lowering and
whatever else the lowering refuses; empty, the step lowers (graph_ir/lowering/report.py). The op mapping is in graph_ir/lowering/table.py, the naming of Variables in
graph_ir/lowering/capture.py (Graph.variable_name(v) gives a variable's GE name). FusedEmaAdam's lr is a GE
attribute: a constant, or the current value of a learning-rate variable the step does not write (lowering again picks
up a new value); a learning rate computed in the step (a schedule) is a LoweringError. Scalar policy: a rank-0 tensor
feeding a GE scalar input (lr, logbase, sign_decay, beta, step) is given shape [1], as in CANN's GE-IR samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph_ir.errors import LoweringError
from graph_ir.graph import Graph
from graph_ir.lowering.control import lower_functional
from graph_ir.lowering.lowerer import Lowerer
from graph_ir.lowering.report import missing_ops, op_table
from graph_ir.lowering.table import LOWERINGS
from graph_ir.lowering.trace import lowering_errors, prepare

__all__ = ["LOWERINGS", "LoweringError", "from_tensorflow", "missing_ops", "op_table"]


def from_tensorflow(fn: Any, *args: Any, fetches: Sequence | Any = None, session: Any = None) -> Graph:
    """Lowers a TF step to a GE graph (see the module docstring for the rules).

    Args:
      fn: a tf.function (traced with `args`: tensors, tf.TensorSpecs or tf.Variables), a ConcreteFunction, a
        tf.Graph, a GraphDef, or a Keras model's train_function (with the batch's specs as `args`).
      *args: the arguments to trace a tf.function with.
      fetches: for a tf.Graph or GraphDef, what tf.compat.v1.Session.run would fetch (ops, tensors or names).
      session: for a tf.Graph, a tf.compat.v1.Session holding its variables' values.
    Returns:
      a verified graph_ir.Graph.
    Raises:
      LoweringError: naming the TF node or the argument that cannot be lowered, or why; every failure is one.
    """
    with lowering_errors("lowering the step"):
        step = prepare(fn, args, fetches, session)
    with lowering_errors(f"lowering {step.name}"):
        return Lowerer(step.graph_def, step.name, args=step.args, variables=step.variables, outputs=step.outputs,
                       must_run=step.must_run, functional=lower_functional).run()
