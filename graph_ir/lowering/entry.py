"""graph_ir.from_tensorflow's entry: trace the step, lower it, and lower it again where a learning rate frozen in one
place is read or written in another (graph_ir/lowering/__init__.py states the rules)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph_ir.errors import LoweringError
from graph_ir.graph import Graph
from graph_ir.lowering.control import lower_functional
from graph_ir.lowering.lowerer import Lowerer
from graph_ir.lowering.trace import lowering_errors, prepare


def from_tensorflow(fn: Any, *args: Any, fetches: Sequence | Any = None, session: Any = None,
                    freeze_learning_rate: bool = True) -> Graph:
    """Lowers a TF step to a GE graph (see graph_ir/lowering/__init__.py for the rules).

    Args:
      fn: a tf.function (traced with `args`: tensors, tf.TensorSpecs or tf.Variables), a ConcreteFunction, a
        tf.Graph, a GraphDef, or a Keras model's train_function (with the batch's specs as `args`).
      *args: the arguments to trace a tf.function with.
      fetches: for a tf.Graph or GraphDef, what tf.compat.v1.Session.run would fetch (ops, tensors or names).
      session: for a tf.Graph, a tf.compat.v1.Session holding its variables' values.
      freeze_learning_rate: whether a FusedEmaAdam learning rate read from a variable that nothing else in the step
        reads or writes becomes ApplyFusedEmaAdam's lr attribute at its current value (the variable left out of the
        graph; Session.set_variables refuses its name), or stays a GE Variable that drives each step through GE ops
        taking lr as a tensor (for callbacks such as ReduceLROnPlateau that change it between steps).
    Returns:
      a verified graph_ir.Graph.
    Raises:
      LoweringError: naming the TF node or the argument that cannot be lowered, or why; every failure is one.
    """
    with lowering_errors("lowering the step"):
        step = prepare(fn, args, fetches, session)
    if not isinstance(freeze_learning_rate, bool):
        raise LoweringError(f"freeze_learning_rate must be a bool, got {freeze_learning_rate!r:.80}")

    def lower(never_frozen: frozenset[str]) -> Graph:
        with lowering_errors(f"lowering {step.name}"):
            return Lowerer(step.graph_def, step.name, args=step.args, variables=step.variables, outputs=step.outputs,
                           must_run=step.must_run, functional=lower_functional,
                           freeze_learning_rate=freeze_learning_rate, never_frozen=never_frozen).run()

    graph = lower(frozenset())
    # A variable frozen in one place but read or written in another (its Variable node is still there) must drive
    # the step everywhere: lowered again with it as a tensor.
    held = {n.name for g in (graph, *graph.subgraphs.values()) for n in g.nodes_of_type("Variable")}
    return lower(frozenset(held & set(graph.frozen_variables))) if held & set(graph.frozen_variables) else graph
