"""What a lowering starts from: the TF graph of the user's step (function calls inlined), its arguments, the
variables it holds, what it returns and what it must run. Every argument it cannot take is a LoweringError that
names it: a tf.Variable argument becomes the GE Variable it is (holding its current value, like a captured one),
other resources (a tf.data iterator) and variants are refused, and so is a dtype graph_ir has no type for."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf

from graph_ir.ir.dtypes import TENSOR_DTYPES
from graph_ir.ir.errors import GraphError, LoweringError
from graph_ir.lowering.capture import function_variables, ge_name, graph_variables, parse_tensor, variable_key
from graph_ir.lowering.inline import inline_calls, is_stateful
from graph_ir.lowering.keras_functions import is_keras_step_function, keras_step, not_a_function_hint

_BATCH_HINT = ("a GE graph takes tensors: lower a function of the batch instead, traced with a tf.TensorSpec per "
               "batch tensor (for Keras, tf.function(lambda x, y: model.train_step((x, y))), or "
               "graph_ir.from_tensorflow(model.train_function, batch_specs))")


class ArgumentKindError(LoweringError, TypeError):
    """from_tensorflow called with the wrong kind of argument: a LoweringError, and a TypeError as it always was."""


@contextlib.contextmanager
def lowering_errors(what: str) -> Iterator[None]:
    """Says any failure inside as a LoweringError ("<what>: <error>", the original chained): from_tensorflow and
    missing_ops fail with nothing else."""
    try:
        yield
    except LoweringError:
        raise
    except (GraphError, ValueError, TypeError, KeyError, IndexError, AttributeError, tf.errors.OpError) as e:
        raise LoweringError(f"{what}: {type(e).__name__}: {e}") from e


@dataclass
class Step:
    """A TF step ready to lower: GraphDef (calls inlined), the Placeholders fed by position, the variables
    ({TF node: (GE name, value, TF variable or None)}), the tensors returned and the ops that must run."""

    name: str
    graph_def: Any
    args: list[str]
    variables: dict[str, tuple[str, np.ndarray, Any]]
    outputs: list[str]
    must_run: list[str]
    refused: dict[str, str] = field(default_factory=dict)  # arguments that cannot be GE inputs (listing only)


def _is_function(fn: Any) -> bool:
    return hasattr(fn, "get_concrete_function") or (hasattr(fn, "graph") and hasattr(fn, "captured_inputs"))


def prepare(fn: Any, args: tuple, fetches: Sequence | Any = None, session: Any = None, *,
            values: bool = True) -> Step:
    """The Step of `fn` (see graph_ir.lowering.from_tensorflow); `values=False` skips reading a tf.Graph's
    variables (for graph_ir.missing_ops, which needs only the ops)."""
    if is_keras_step_function(fn):
        fn, args = keras_step(fn, args)
    if not (_is_function(fn) or isinstance(fn, (tf.Graph, tf.compat.v1.GraphDef))):
        raise ArgumentKindError("from_tensorflow takes a tf.function, a ConcreteFunction, a tf.Graph or a "
                                f"GraphDef, got {type(fn).__name__} (a Keras model's train_function is taken too, "
                                f"with the batch's specs){not_a_function_hint(fn)}")
    if not _is_function(fn):
        if args:
            raise ArgumentKindError("arguments are only used to trace a tf.function; a graph takes fetches=")
        return _from_graph(fn, fetches, session, values)
    if fetches is not None or session is not None:
        raise ArgumentKindError("fetches and session are for a tf.Graph or GraphDef; a function lowers what it runs")
    if hasattr(fn, "get_concrete_function"):
        name = getattr(getattr(fn, "python_function", None), "__name__", None) or getattr(fn, "__name__", "function")
        try:
            concrete = fn.get_concrete_function(*args)
            if _copies_pending_averages(concrete) and hasattr(fn, "_clone"):
                concrete = fn._clone(python_function=fn.python_function).get_concrete_function(*args)
        except Exception as e:  # the user's function or arguments: said as a LoweringError, TF's error chained
            raise LoweringError(f"tracing {name} with arguments {_describe(args)} failed: {type(e).__name__}: "
                                f"{e}") from e
        return _from_function(concrete, args, strict=values)
    if args:
        raise ArgumentKindError("arguments are only used to trace a tf.function; a ConcreteFunction is already "
                                "traced")
    return _from_function(fn, None, strict=values)


# tf_plugin's FusedEmaAdam copies the weights of a model built inside its first traced step (no keras.Input) into
# its EMA slot at the first update, under this name scope (tf_plugin/pending_average.py, PENDING_SCOPE). A trace made
# after that update has no copy: the step is traced again (with the tf.function's own options) to lower that one.
PENDING_SCOPE = "pending_ema_copy"


def _copies_pending_averages(concrete: Any) -> bool:
    return any(f"/{PENDING_SCOPE}/" in f"/{op.name}" for op in concrete.graph.get_operations())


def _describe(args: tuple) -> str:
    text = ", ".join(type(a).__name__ if not isinstance(a, (tf.TensorSpec, tf.Tensor)) else repr(a) for a in args)
    return f"({text[:300]})"


def _from_function(concrete, call_args: tuple | None, strict: bool = True) -> Step:
    """The Step of a ConcreteFunction; not `strict` (graph_ir.missing_ops), arguments that cannot be GE inputs are
    listed in Step.refused instead of refused at once."""
    func_graph = concrete.graph
    graph_def, stateful_calls, renamed = inline_calls(func_graph.as_graph_def())
    variables, captured, constants = function_variables(func_graph)
    _embed_constants(graph_def, constants)
    inputs = [t for t in func_graph.inputs if t.op.name not in captured]
    by_argument = _argument_variables(concrete, call_args, inputs)
    for name, var in by_argument.items():
        variables[name] = (ge_name(variable_key(var), var.name), np.array(var.numpy(), copy=True), var)
    refused = {}
    for tensor in inputs:
        if tensor.op.name not in by_argument:
            try:
                _check_argument(tensor)
            except LoweringError as e:
                if strict:
                    raise
                refused[tensor.op.name] = str(e)
    args = [t.op.name for t in inputs if t.op.name not in by_argument]
    outputs = [renamed(t.name) for t in func_graph.outputs if t.dtype != tf.resource]
    must_run = [n.name for n in graph_def.node if is_stateful(n.op) and n.op != "Placeholder"] + stateful_calls
    must_run += [op.name for op in getattr(func_graph, "control_outputs", [])]
    return Step(func_graph.name, graph_def, args, variables, outputs, must_run, refused)


def _embed_constants(graph_def, constants: dict[str, np.ndarray]) -> None:
    """Turns the Placeholder of each captured constant tensor into a Const holding its value (in place)."""
    for node in graph_def.node:
        if node.op == "Placeholder" and node.name in constants:
            dtype = node.attr["dtype"].type
            node.op = "Const"
            node.ClearField("attr")
            node.attr["dtype"].type = dtype
            node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(constants[node.name]))


def _argument_variables(concrete, call_args: tuple | None, inputs: list) -> dict[str, tf.Variable]:
    """The tf.Variables passed as arguments, by the Placeholder that stands for each."""
    signature = tf.nest.flatten(concrete.structured_input_signature, expand_composites=True)
    values = tf.nest.flatten((tuple(call_args), {}), expand_composites=True) if call_args is not None else []
    if len(values) != len(signature):  # a ConcreteFunction, or not traced from these arguments: values unknown
        values = [None] * len(signature)
    # One Placeholder per TypeSpec of the signature, in order (Python values are traced in as constants).
    pairs = [(spec, value) for spec, value in zip(signature, values) if isinstance(spec, tf.TypeSpec)]
    if len(pairs) != len(inputs):
        pairs = [(None, None)] * len(inputs)
    out = {}
    for tensor, (spec, value) in zip(inputs, pairs):
        if tensor.dtype != tf.resource or type(spec).__name__ != "VariableSpec":
            continue
        name = tensor.op.name
        if isinstance(value, tf.Variable):
            out[name] = value
        elif call_args is None:
            raise LoweringError(f"argument {name!r} is a tf.Variable; a ConcreteFunction does not say which one: pass "
                                "the tf.function and the variable itself (from_tensorflow(fn, variable, ...))")
        else:
            raise LoweringError(f"argument {name!r} is a tf.Variable, but graph_ir could not tell which of the "
                                f"arguments {_describe(call_args)} it is; capture the variable in the function instead "
                                "of passing it")
    return out


def _check_argument(tensor) -> None:
    """Refuses an argument that cannot be a GE Data node, naming it and its dtype."""
    name, dtype = tensor.op.name, tensor.dtype
    if dtype in (tf.resource, tf.variant):
        raise LoweringError(f"argument {name!r} is a {dtype.name} tensor (a tf.data iterator or dataset, or a "
                            "resource other than a tf.Variable), which cannot be an input of a GE graph; "
                            f"{_BATCH_HINT}")
    if dtype == tf.string:
        raise LoweringError(f"argument {name!r} is a string tensor, which GE graphs take none of: on Ascend, string "
                            "preprocessing (keras.layers.StringLookup, tf.strings) runs in the input pipeline; move it "
                            "into tf.data (dataset.map(lambda x, y: (lookup(x), y))) and lower the step from its "
                            "numeric output")
    if dtype.name not in TENSOR_DTYPES:
        raise LoweringError(f"argument {name!r} has dtype {dtype.name}, which graph_ir has no GE type for; it takes "
                            f"{', '.join(TENSOR_DTYPES)}")


def fetch_names(fetches) -> tuple[list[str], list[str]]:
    """(tensor names to return, op names to run) of Session.run-style fetches."""
    if fetches is None:
        raise ArgumentKindError("from_tensorflow(graph, fetches=...): say what Session.run would fetch (ops or "
                                "tensors)")
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
            raise ArgumentKindError(f"fetches: {item!r} is not an op, a tensor or a name")
    return tensors, ops


def closure(graph_def, roots: list[str]) -> set[str]:
    """The names of the nodes `roots` depend on, data and control, themselves included."""
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


def _from_graph(source, fetches, session, values: bool) -> Step:
    graph = source if isinstance(source, tf.Graph) else None
    graph_def, _, renamed = inline_calls(source.as_graph_def() if graph is not None else source)
    tensors, ops = fetch_names(fetches)
    tensors = [renamed(t) for t in tensors]
    needed = closure(graph_def, [parse_tensor(t)[0] for t in tensors] + ops)
    variables = graph_variables(graph, graph_def, needed, session, source) if values else {}
    args = [n.name for n in graph_def.node if n.op == "Placeholder" and n.name in needed]
    return Step("graph", graph_def, args, variables, tensors, ops)


def unknown_dims(graph_def, placeholder: str) -> bool:
    """Whether the Placeholder `placeholder` of graph_def has a dim known only at run time (None, GE's -1)."""
    node = next((n for n in graph_def.node if n.name == placeholder), None)
    if node is None or "shape" not in node.attr:
        return False
    shape = node.attr["shape"].shape
    return not shape.unknown_rank and any(d.size < 0 for d in shape.dim)
