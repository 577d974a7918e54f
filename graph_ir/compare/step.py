"""compare_step: a TF step run once in TensorFlow and once in graph_ir.Session on the same inputs and state, node by
node (graph_ir/compare/__init__.py says what the rows mean)."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from graph_ir.compare import metrics, tolerances
from graph_ir.compare.observe import Observer, run_observed
from graph_ir.compare.report import Comparison, Row
from graph_ir.compare.tf_values import run_step
from graph_ir.ir.errors import GraphError
from graph_ir.ir.graph import Graph
from graph_ir.lowering.entry import from_tensorflow
from graph_ir.lowering.trace import lowering_errors, prepare
from graph_ir.runtime.session import Session


def compare_step(fn: Any, *inputs: Any, graph: Graph | None = None, isolated: bool = True,
                 session: Session | None = None) -> Comparison:
    """Runs the tf.function `fn` once on `inputs` in TensorFlow and its lowered graph once in a Session, from the
    same variable values (the step's current ones), and compares every GE node that stands for a TF node, then
    every variable the step holds.

    Args:
      fn: the step, a tf.function of its batch tensors (as graph_ir.from_tensorflow takes it).
      *inputs: the batch, arrays (the specs to trace `fn` with are theirs).
      graph: the lowered graph to run (by default from_tensorflow(fn, *specs)).
      isolated: also run each compared node on TF's values of its inputs.
      session: the Session to run in (a new one by default); graph id 0 is added to it and removed after. For one
        rank of a data-parallel job, a Session joined to the group (Session(group=graph_ir.distributed.world())),
        with `graph` the rank's graph from graph_ir.from_distributed: every rank compares at once, its Hcom nodes
        run (and run isolated) on every rank in the same order, and never in float64.
    Returns:
      a Comparison; TF's variables are left as one step of `fn` leaves them.
    Raises:
      LoweringError: the step does not lower. GraphError: it does not run.
    """
    if not isinstance(isolated, bool):
        raise TypeError(f"compare_step: isolated must be a bool, got {isolated!r:.80}")
    arrays = [np.asarray(x) for x in inputs]
    specs = [tf.TensorSpec(a.shape, tf.dtypes.as_dtype(a.dtype)) for a in arrays]
    if graph is None:
        graph = from_tensorflow(fn, *specs)
    elif not isinstance(graph, Graph):
        raise TypeError(f"compare_step: graph must be a graph_ir.Graph, got {type(graph).__name__}")
    with lowering_errors("tracing the step to compare it"):
        step = prepare(fn, tuple(specs))  # the variables' current values: the state both runs start from
    session = Session() if session is None else session
    session.add_graph(0, graph)
    try:
        held = {name for name in (ge for ge, _, _ in step.variables.values()) if _holds(session, name)}
        session.set_variables({ge: value for ge, value, _ in step.variables.values() if ge in held})
        tf_inputs = arrays + _call_time_values(fn, specs, step.args[len(arrays):])
        tf_run = run_step(step, tf_inputs, {n.name for n in graph.nodes.values()})
        observer = Observer(lambda name, j: tf_run.values.get((name, j)), tf_run.op_types,
                            tolerances.node_tolerance, isolated, exact=True)
        run_observed(session, 0, arrays, observer)
        rows = observer.rows
        departed = any(not r.within for r in rows)
        half_step = any(r.dtype in ("float16", "bfloat16") for r in rows)
        for ge, _, var in step.variables.values():
            if ge in held and var is not None:
                rows.append(_variable_row(ge, session.get_variables([ge])[0], var, departed, half_step))
    finally:
        session.remove_graph(0)
    return Comparison(rows)


def _call_time_values(fn: Any, specs: list, names: list[str]) -> list[np.ndarray]:
    """The values of the step's inputs beyond its batch that TF computes at each call: the instance keys of a
    multi-worker strategy's collectives (FuncGraph.capture_call_time_value in cross_device_utils.py), which the
    lowering drops with the collectives' keys. Every worker calls them in the same order, so the keys agree."""
    if not names:
        return []
    concrete = fn.get_concrete_function(*specs) if hasattr(fn, "get_concrete_function") else fn
    graph = concrete.graph
    closures = {t.op.name: (t, c) for t, c in zip(graph.deferred_internal_captures, graph.deferred_external_captures)}
    missing = [name for name in names if name not in closures]
    if missing:
        raise ValueError(f"compare_step: the step takes inputs {missing} beyond the {len(specs)} given")
    return [np.asarray(closures[name][1]()).reshape(closures[name][0].shape) for name in names]


def _holds(session: Session, name: str) -> bool:
    try:
        session.get_variables([name])
    except KeyError:
        return False
    return True


def _variable_row(ge_name: str, ours: np.ndarray, variable: Any, departed: bool, half_step: bool) -> Row:
    theirs = np.asarray(variable.numpy())
    if ours.shape != theirs.shape:
        raise GraphError(f"Variable {ge_name!r} is {list(ours.shape)} in the Session but {list(theirs.shape)} in TF")
    return Row(ge_name, "Variable", variable.name, "Variable", 0, tuple(theirs.shape), str(theirs.dtype),
               metrics.compute(ours, theirs), tolerances.variable_tolerance(theirs.dtype, half_step), carried_in=0.0,
               upstream_within=not departed)
