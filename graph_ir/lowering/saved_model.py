"""Lowering what users have: a ConcreteFunction or SavedModel signature whose dims are unknown (a None batch), given
its input shapes by argument name as ATC's --input_shape gives them ("x:8,12;mask:8,12", or {"x": (8, 12)}; -1 for a
dim left known only at run time).

The function is called from a tf.function traced on those shapes, so TF itself checks them against the signature
and the lowering sees the step at those shapes (its call is inlined). Dims still unknown lower as GE's -1
(graph_ir/dynamic); an unknown rank is refused, naming the argument; so is a shape for an argument the function does
not have."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from graph_ir.ir.errors import LoweringError
from graph_ir.ir.input_shapes import parse_input_shapes


def _arguments(concrete) -> tuple[list[tuple[str, tf.TensorSpec]], bool]:
    """The function's (name, spec) arguments, and whether it takes them by keyword (a signature) or by position."""
    args, kwargs = concrete.structured_input_signature
    if args and kwargs:
        raise LoweringError("a function taking arguments both by position and by keyword cannot be given shapes "
                            "by name; trace a tf.function of it instead")
    named = list(kwargs.items()) if kwargs else \
        [(spec.name or tensor.op.name, spec) for spec, tensor in zip(args, concrete.inputs)]
    for name, spec in named:
        if not isinstance(spec, tf.TensorSpec):
            raise LoweringError(f"argument {name!r} is a {type(spec).__name__}; only tensor arguments can be given "
                                "shapes")
    return named, bool(kwargs)


def with_input_shapes(concrete, input_shapes: str | Mapping[str, Any] | None) -> tuple[Any, list[tf.TensorSpec]]:
    """A tf.function calling `concrete`, and the specs to trace it with: each argument's shape from `input_shapes`
    (by name) or its own, whose rank must then be known."""
    shapes = parse_input_shapes(input_shapes) if input_shapes is not None else {}
    named, by_keyword = _arguments(concrete)
    names = [name for name, _ in named]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise LoweringError(f"input_shapes names {unknown}, which the function does not take; its arguments are "
                            f"{names}")
    specs = []
    for name, spec in named:
        shape = tf.TensorShape(shapes.get(name, spec.shape))
        if not spec.shape.is_compatible_with(shape):
            raise LoweringError(f"argument {name!r}: input shape {shape.as_list()} does not fit the function's "
                                f"{spec.shape}")
        if shape.rank is None:
            raise LoweringError(f"argument {name!r} has an unknown rank; give its shape with "
                                f"input_shapes={{{name!r}: (...)}} or \"{name}:d0,d1,...\" (-1 for a dim known only "
                                "at run time), as ATC's --input_shape")
        specs.append(tf.TensorSpec(shape, spec.dtype, name=name))

    def call(*tensors):
        return concrete(**dict(zip(names, tensors))) if by_keyword else concrete(*tensors)

    name = getattr(concrete, "name", b"function")  # a ConcreteFunction's name is bytes
    call.__name__ = name.decode() if isinstance(name, bytes) else str(name)
    return tf.function(call, autograph=False), specs


def is_concrete(fn: Any) -> bool:
    """Whether fn is a ConcreteFunction (traced already: its shapes come with it)."""
    return not hasattr(fn, "get_concrete_function") and hasattr(fn, "captured_inputs")


def has_unknown_dims(concrete) -> bool:
    """Whether a ConcreteFunction takes a tensor whose shape is not fully known (a None batch)."""
    return any(not t.shape.is_fully_defined() for t in concrete.graph.inputs if t.dtype != tf.resource)


def _register_our_ops() -> None:
    """Loads tf_plugin's op library, which a SavedModel trained with PowerSign or FusedEmaAdam holds ops of (TF
    cannot load it otherwise); without tf_plugin installed, TF's own error names the op."""
    try:
        import tf_plugin  # noqa: F401
    except ImportError:
        pass


def saved_model_function(path: str, signature: str = "serving_default") -> tuple[Any, Any]:
    """(the loaded SavedModel, the ConcreteFunction of `signature`): a serving signature, or a tf.function saved as
    an attribute (a training step saved with its variables) with one input signature. Keep the first alive while
    the second is used: its variables belong to it."""
    if not isinstance(path, (str, os.PathLike)) or not os.path.isdir(path):
        raise LoweringError(f"SavedModel {str(path)!r}: no such directory")
    _register_our_ops()
    try:
        loaded = tf.saved_model.load(os.fspath(path))
    except Exception as e:  # TF's own reader: a missing or corrupt saved_model.pb, an op it does not know
        raise LoweringError(f"SavedModel {os.fspath(path)!r} cannot be loaded: {type(e).__name__}: "
                            f"{str(e).splitlines()[0] if str(e) else ''}") from e
    if signature in getattr(loaded, "signatures", {}):
        return loaded, loaded.signatures[signature]
    attribute = getattr(loaded, signature, None)
    concretes = list(getattr(attribute, "concrete_functions", []) or [])
    if len(concretes) == 1:
        return loaded, concretes[0]
    known = sorted({*getattr(loaded, "signatures", {}),
                    *(n for n in dir(loaded) if not n.startswith("_") and hasattr(getattr(loaded, n, None),
                                                                                  "concrete_functions"))})
    if len(concretes) > 1:
        raise LoweringError(f"SavedModel {os.fspath(path)!r}: function {signature!r} was saved with "
                            f"{len(concretes)} traces; save it with one input_signature")
    raise LoweringError(f"SavedModel {os.fspath(path)!r} has no signature or function {signature!r}; it has "
                        f"{known}")


MAX_GRAPH_BYTES = 2**31 - 1  # protobuf's own limit on one message


def frozen_graph_def(path: str, input_shapes: str | Mapping[str, Any] | None = None):
    """The GraphDef of a frozen graph file (.pb: variables folded into Consts, as ATC takes TF models), each
    Placeholder given its shape from `input_shapes` by name where the file leaves dims unknown."""
    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        raise LoweringError(f"frozen graph {str(path)!r}: no such file")
    if os.path.getsize(path) > MAX_GRAPH_BYTES:
        raise LoweringError(f"frozen graph {os.fspath(path)!r}: {os.path.getsize(path)} bytes, over protobuf's 2 GiB")
    graph_def = tf.compat.v1.GraphDef()
    with open(path, "rb") as f:
        try:
            graph_def.ParseFromString(f.read())
        except Exception as e:  # protobuf's DecodeError: not a GraphDef
            raise LoweringError(f"frozen graph {os.fspath(path)!r} is not a binary GraphDef: {e}") from e
    shapes = parse_input_shapes(input_shapes) if input_shapes is not None else {}
    placeholders = {n.name: n for n in graph_def.node if n.op == "Placeholder"}
    unknown = sorted(set(shapes) - set(placeholders))
    if unknown:
        raise LoweringError(f"input_shapes names {unknown}, which are not Placeholders of {os.fspath(path)!r}; its "
                            f"Placeholders are {sorted(placeholders)}")
    for name, shape in shapes.items():
        declared = tf.TensorShape(placeholders[name].attr["shape"].shape)
        if not declared.is_compatible_with(shape):
            raise LoweringError(f"Placeholder {name!r}: input shape {list(shape)} does not fit its shape {declared}")
        placeholders[name].attr["shape"].shape.CopyFrom(tf.TensorShape(shape).as_proto())
    return graph_def
