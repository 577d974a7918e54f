"""graph_ir.from_tensorflow's entry: trace the step, lower it, and lower it again where a learning rate frozen in one
place is read or written in another (graph_ir/lowering/__init__.py states the rules)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from graph_ir.dynamic import PROBES, merge
from graph_ir.ir.errors import LoweringError
from graph_ir.ir.graph import Graph
from graph_ir.lowering.control import lower_functional
from graph_ir.lowering.lowerer import Lowerer
from graph_ir.lowering.ops.valued import VALUED_TF_OPS
from graph_ir.lowering.saved_model import (
    frozen_graph_def,
    has_unknown_dims,
    is_concrete,
    saved_model_function,
    with_input_shapes,
)
from graph_ir.lowering.trace import ArgumentKindError, Step, lowering_errors, prepare, unknown_dims

InputShapes = str | Mapping[str, Sequence[int]] | None


def from_tensorflow(fn: Any, *args: Any, fetches: Sequence | Any = None, session: Any = None,
                    freeze_learning_rate: bool = True, input_shapes: InputShapes = None) -> Graph:
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
      input_shapes: for a ConcreteFunction whose dims are unknown (a None batch): each argument's shape by name, as
        ATC's --input_shape gives them ("x:8,12;y:8", -1 for a dim known only at run time) or as a mapping
        ({"x": (8, 12)}). Dims left unknown lower as GE's -1: the graph is a template that the Session runs at
        every call's shapes (graph_ir/dynamic).
    Returns:
      a verified graph_ir.Graph.
    Raises:
      LoweringError: naming the TF node or the argument that cannot be lowered, or why; every failure is one.
    """
    concrete = is_concrete(fn)
    if input_shapes is not None and (not concrete or args):
        raise ArgumentKindError("input_shapes= gives a ConcreteFunction's (or SavedModel signature's) argument shapes; "
                                "a tf.function is traced with its arguments' tf.TensorSpecs instead")
    if concrete and has_unknown_dims(fn) and input_shapes is not None:
        fn, args = with_input_shapes(fn, input_shapes)  # traced again on the given shapes
    with lowering_errors("lowering the step"):
        step = prepare(fn, args, fetches, session)
    return lower_step(step, freeze_learning_rate)


def lower_step(step: Step, freeze_learning_rate: bool = True) -> Graph:
    """Lowers a prepared Step (graph_ir/lowering/trace.py) to a verified GE graph: twice at probe sizes where a size
    is known only at run time, and again where a learning rate frozen in one place is read or written in another."""
    if not isinstance(freeze_learning_rate, bool):
        raise LoweringError(f"freeze_learning_rate must be a bool, got {freeze_learning_rate!r:.80}")

    # Lowered twice where a size is known only at run time: an argument's None dim, or a Where's count.
    valued = any(n.op in VALUED_TF_OPS for n in step.graph_def.node) or any(
        n.op in VALUED_TF_OPS for f in step.graph_def.library.function for n in f.node_def)
    probes = PROBES if valued or any(unknown_dims(step.graph_def, arg) for arg in step.args) else (None,)

    def lower_at(probe: int | None, never_frozen: frozenset[str]) -> Graph:
        what = f"lowering {step.name}" + ("" if probe is None else f" with its unknown dims at {probe}")
        with lowering_errors(what):
            try:
                return Lowerer(step.graph_def, step.name, args=step.args, variables=step.variables,
                               outputs=step.outputs, must_run=step.must_run, functional=lower_functional,
                               freeze_learning_rate=freeze_learning_rate, never_frozen=never_frozen,
                               probe=probe).run()
            except LoweringError as e:
                raise LoweringError(f"{what}: {e}" if probe is not None else str(e)) from e

    def lower(never_frozen: frozenset[str]) -> Graph:
        graphs = [lower_at(probe, never_frozen) for probe in probes]
        with lowering_errors(f"lowering {step.name}"):
            return graphs[0] if len(graphs) == 1 else merge(*graphs)  # a template: unknown dims are -1

    graph = lower(frozenset())
    # A variable frozen in one place but read or written in another (its Variable node is still there) must drive
    # the step everywhere: lowered again with it as a tensor.
    held = {n.name for g in (graph, *graph.subgraphs.values()) for n in g.nodes_of_type("Variable")}
    return lower(frozenset(held & set(graph.frozen_variables))) if held & set(graph.frozen_variables) else graph


def from_saved_model(path: str | os.PathLike, signature: str = "serving_default", *, input_shapes: InputShapes = None,
                     freeze_learning_rate: bool = True) -> Graph:
    """Lowers a SavedModel's signature (or a tf.function saved as an attribute with one input signature: a training
    step saved with its variables) to a GE graph, as ATC converts one.

    Args:
      path: the SavedModel directory.
      signature: a signature name ("serving_default") or the name of a saved tf.function attribute.
      input_shapes: each argument's shape by name where the signature leaves a dim unknown ("x:8,12;y:8", or
        {"x": (8, 12)}): ATC's --input_shape.
      freeze_learning_rate: as for from_tensorflow.
    Returns:
      a verified graph_ir.Graph; its Variables hold the SavedModel's values.
    Raises:
      LoweringError: naming the directory, signature, argument or TF node that cannot be lowered.
    """
    loaded, concrete = saved_model_function(path, signature)  # `loaded` owns the variables: alive until lowered
    fn, specs = with_input_shapes(concrete, input_shapes)
    graph = from_tensorflow(fn, *specs, freeze_learning_rate=freeze_learning_rate)
    del loaded
    return graph


def from_frozen_graph(path: str | os.PathLike, outputs: Sequence[str], *, input_shapes: InputShapes = None) -> Graph:
    """Lowers a frozen GraphDef file (.pb, its variables folded into Consts), as ATC converts one.

    Args:
      path: the .pb file.
      outputs: the tensors or ops to compute, as ATC's --out_nodes names them ("logits:0", or an op name).
      input_shapes: Placeholder shapes by name where the file leaves dims unknown ("x:8,12", ATC's --input_shape).
    Returns:
      a verified graph_ir.Graph whose Data nodes are the Placeholders the outputs need.
    Raises:
      LoweringError: naming the file, Placeholder or TF node that cannot be lowered.
    """
    if isinstance(outputs, str) or not outputs:
        raise LoweringError(f"outputs must be a list of tensor or op names (ATC's --out_nodes), got {outputs!r:.80}")
    return from_tensorflow(frozen_graph_def(path, input_shapes), fetches=list(outputs))
