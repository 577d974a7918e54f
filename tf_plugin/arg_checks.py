"""The checks the wrappers make in Python before any op runs: argument lists of int64, and for the portable path
(XLA has no run-time errors) the fused multi-tensor kernel's layout checks, with its messages
(tf_plugin/cc/op_kernels/multi_tensor.h), so both paths refuse the same calls alike."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import resource_variable_ops


def invalid(message: str) -> tf.errors.InvalidArgumentError:
    return tf.errors.InvalidArgumentError(None, None, message)


def tf_variable(var: Any) -> Any:
    """The tf.Variable behind a Keras Variable (its ``value``); anything else as given."""
    if isinstance(getattr(var, "value", None), tf.Variable) and not isinstance(var, tf.Variable):
        return var.value
    return var


def handle(var: Any) -> Any:
    """A resource handle; a tf.Variable (or a Keras Variable) is accepted for its handle. Inside a tf.function the
    variable is also recorded on the function's graph (as reading it would), so ConcreteFunction.variables lists it."""
    var = tf_variable(var)
    if isinstance(var, tf.Variable):
        graph = tf.compat.v1.get_default_graph()
        if hasattr(graph, "watch_variable"):
            graph.watch_variable(var)
        return var.handle
    return var


def variable_dtype(var: Any) -> tf.DType | None:
    """The dtype a variable holds, when known without running anything (a tf or Keras Variable)."""
    var = tf_variable(var)
    return var.dtype.base_dtype if isinstance(var, tf.Variable) else None


def _static_variable_shape(var: Any) -> tf.TensorShape:
    """The shape a variable (or a resource handle, from its handle data) holds, as far as known when tracing."""
    var = tf_variable(var)
    if isinstance(var, tf.Variable):
        return tf.TensorShape(var.shape)
    data = resource_variable_ops.get_eager_safe_handle_data(var) if getattr(var, "dtype", None) == tf.resource \
        else None
    if data is not None and data.is_set and data.shape_and_type:
        return tf.TensorShape(data.shape_and_type[0].shape)
    return tf.TensorShape(None)


def int64_list(values, name: str) -> list[int]:
    """An attribute list of int64 (no_decay, state_offsets), checked before TF converts it."""
    out = []
    for k, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise invalid(f"{name}[{k}] = {v!r:.40} is not an int")
        if not -2**63 <= int(v) < 2**63:
            raise invalid(f"{name}[{k}] = {int(v)} does not fit in int64")
        out.append(int(v))
    return out


def _cc_name(dtype: tf.DType) -> str:
    """TF's C++ name of a dtype (DataTypeString: float, double, half), as the kernel's messages say it."""
    return {"float32": "float", "float64": "double", "float16": "half"}.get(dtype.name, dtype.name)


def _shape_string(shape: tf.TensorShape) -> str:
    return "[" + ",".join(str(d) for d in shape.as_list()) + "]"  # TensorShape::DebugString, as the kernel says


def check_multi_layout(variables, flat: dict, grads, kwargs, dtype: tf.DType) -> None:
    """The fused kernel's checks, for the portable path (XLA has no run-time errors), with its messages: no variable
    twice (identified by its resource handle), each variable of dtype T and its gradient's shape, each flat variable
    1-D holding the state of all variables (or, with state_offsets, N offsets placing every range inside it, none
    overlapping), no_decay indices into the N variables. Shapes unknown when tracing are left to the ops."""
    n = len(variables)
    names = [f"vars[{k}]" for k in range(n)] + list(flat)
    seen: dict[Any, str] = {}
    for name, obj in zip(names, (*variables, *flat.values())):
        resource = handle(obj)
        key = resource.ref() if hasattr(resource, "ref") else id(resource)
        if key in seen:
            raise invalid(f"{seen[key]} and {name} are the same variable; each variable may appear once")
        seen[key] = name
        held = variable_dtype(obj)
        if held is not None and held != dtype:
            raise invalid(f"{name} is a variable of dtype {_cc_name(held)} but the op's T is {_cc_name(dtype)}")
    for k in kwargs.get("no_decay", ()):
        if not 0 <= k < n:
            raise invalid(f"no_decay holds {k}, not an index into the N = {n} variables")
    sizes = []
    for k, (var, grad) in enumerate(zip(variables, grads)):
        shape = _static_variable_shape(var)
        if shape.is_fully_defined() and grad.shape.is_fully_defined() and shape != grad.shape:
            raise invalid(f"vars[{k}] and grads[{k}] do not have the same shape{_shape_string(shape)} "
                           f"{_shape_string(grad.shape)}")  # the stock wording
        sizes.append(grad.shape.num_elements())
    state_offsets = kwargs["state_offsets"]
    if state_offsets and len(state_offsets) != n:
        raise invalid(f"state_offsets has {len(state_offsets)} entries, expected N = {n}")
    flat_shapes = {name: _static_variable_shape(var) for name, var in flat.items()}
    first = next(iter(flat_shapes.values()), tf.TensorShape(None))
    for name, shape in flat_shapes.items():
        if shape.rank is None or None in sizes or first.rank is None:
            continue
        total = sum(sizes)
        if not state_offsets and (shape.rank != 1 or shape.num_elements() != total):
            raise invalid(f"{name} must be a flat variable of shape [{total}] (the elements of all N variables), "
                           f"got {_shape_string(shape)}")
        if shape.rank != 1 or shape.num_elements() != first.num_elements():
            raise invalid(f"{name} must be a flat variable of shape [{first.num_elements()}] (as {next(iter(flat))}),"
                           f" got {_shape_string(shape)}")
    size = first.num_elements() if first.rank == 1 else None
    if state_offsets and size is not None and None not in sizes:
        for k, (start, count) in enumerate(zip(state_offsets, sizes)):
            if start < 0 or start > size - count:
                raise invalid(f"state_offsets[{k}] = {start}: vars[{k}]'s {count} elements do not fit in the flat "
                               f"state of {size}")
        ranges = sorted(zip(state_offsets, sizes, range(n)))
        for (start, count, k), nxt in itertools.pairwise(ranges):
            if start + count > nxt[0]:
                raise invalid(f"state_offsets: the state of vars[{k}] and vars[{nxt[2]}] overlap")
