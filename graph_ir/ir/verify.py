"""The verifier: every node checked against its IR prototype (graph_ir/ir/registry.py): attributes, inputs, the
sources of in-place inputs, static shapes, and the Const inputs that decide a shape; the output descs are inferred
by the op's declared rule (graph_ir/ir/output_rules.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Handle
from graph_ir.ir.registry import WRITABLE_SOURCES, IrAttr, IrOp


def is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def verify_attrs(op: IrOp, node: str, attrs: dict[str, Any]) -> dict[str, Any]:
    """The attrs with defaults filled in; an unknown attr, a missing required one or a wrong type is an error."""
    known = {a.name: a for a in op.attrs}
    for key in attrs:
        if key not in known:
            raise GraphError(f"{op.type} {node!r}: unknown attribute {key!r}; {op.type} has "
                             f"{', '.join(known) or 'no attributes'}")
    out = {}
    for a in op.attrs:
        if a.name not in attrs or (attrs[a.name] is None and a.default is None and not a.required):  # (not given)
            if a.required:
                raise GraphError(f"{op.type} {node!r}: required attribute {a.name!r} ({a.type}) is missing")
            if a.default is None:
                continue
            value = a.default
        else:
            value = attrs[a.name]
        out[a.name] = _check_attr(op, node, a, value)
    return out


def check_list_count(op: IrOp, node: str, inputs: Sequence[Handle | None], attrs: dict[str, Any]) -> None:
    """GE's `N` attribute of an op with a list input (AddN, ConcatV2, Pack, Einsum) is the list's length."""
    if op.dynamic_input is not None and "N" in attrs:
        count = op.list_count(len(inputs))
        if attrs["N"] != count:
            raise GraphError(f"{op.type} {node!r}: attribute 'N' is {attrs['N']}, but the list input "
                             f"{op.inputs[op.dynamic_input].name!r} has {count} tensors")


def _check_attr(op: IrOp, node: str, a: IrAttr, value: Any) -> Any:
    def bad(expected: str) -> GraphError:
        return GraphError(f"{op.type} {node!r}: attribute {a.name!r} must be {expected}, got {value!r:.80} "
                          f"({type(value).__name__})")

    if a.type == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise bad("a bool")
        return bool(value)
    if a.type == "int":
        if not is_int(value):
            raise bad("an int")
        if a.minimum is not None and value < a.minimum:
            raise bad(f"an int >= {a.minimum}")
        return int(value)
    if a.type == "float":
        if not (is_int(value) or isinstance(value, (float, np.floating))):
            raise bad("a float")
        return float(value)
    if a.type == "string":
        if not isinstance(value, str):
            raise bad("a str")
        return value
    if a.type in ("type", "dtype_int"):
        try:
            return as_dtype(value)
        except TypeError:
            raise bad("a dtype") from None
    if a.type == "tensor":
        if not isinstance(value, np.ndarray):
            raise bad("a NumPy array")
        try:
            dtype = as_dtype(value.dtype)
        except TypeError as e:
            raise bad(f"an array of a graph_ir dtype ({e})") from None
        # Native byte order and C order, so that the kernels and NumPy read the same values (np.ascontiguousarray
        # would turn a 0-d array into 1-d).
        value = np.asarray(value, dtype=np.dtype(dtype.numpy))
        return value if value.flags.c_contiguous else value.copy(order="C")
    if a.type == "list_int":
        if not isinstance(value, (list, tuple)) or not all(is_int(v) for v in value):
            raise bad("a list of ints")
        return [int(v) for v in value]
    if a.type == "list_float":
        if not isinstance(value, (list, tuple)) or not all(is_int(v) or isinstance(v, (float, np.floating))
                                                           for v in value):
            raise bad("a list of floats")
        return [float(v) for v in value]
    raise AssertionError(a.type)


def verify_inputs(op: IrOp, node: str, inputs: Sequence[Handle | None]) -> None:
    """Arity, dtypes against the IR lists, the op's shared-dtype, shared-shape and scalar constraints, and that each
    in-place input comes from a Variable, RefData or Data, directly or through another in-place op (never a Const:
    it would be rewritten)."""
    dyn = op.dynamic_input
    if dyn is not None:  # one list input (NetOutput's, AddN's x, ConcatV2's x before concat_dim): the rest are fixed
        if op.list_count(len(inputs)) < 0 or any(h is None for h in inputs):
            raise GraphError(f"{op.type} {node!r}: takes {len(op.inputs) - 1} inputs besides the list "
                             f"{op.inputs[dyn].name!r} (inputs in IR order: {', '.join(i.name for i in op.inputs)}), "
                             f"got {len(inputs)}, none of them None")
        pairs = [(i.name if k is None else f"{i.name}[{k}]", i, h)
                 for (i, k), h in zip(op.expand_inputs(len(inputs)), inputs)]
    else:
        if len(inputs) > len(op.inputs):
            raise GraphError(f"{op.type} {node!r}: takes {len(op.inputs)} inputs "
                             f"({', '.join(i.name for i in op.inputs) or 'none'}), got {len(inputs)}")
        padded = list(inputs) + [None] * (len(op.inputs) - len(inputs))
        pairs = [(i.name, i, h) for i, h in zip(op.inputs, padded)]
        for name, spec, h in pairs:
            if h is None and not spec.optional:
                raise GraphError(f"{op.type} {node!r}: required input {name!r} is missing "
                                 f"(inputs in IR order: {', '.join(i.name for i in op.inputs)})")
    for name, spec, h in pairs:
        if h is None:
            continue
        if h.dtype.name not in spec.dtypes:
            raise GraphError(f"{op.type} {node!r}: input {name!r} has dtype {h.dtype}, expected one of "
                             f"{', '.join(spec.dtypes)}")
        if spec.scalar and h.shape not in ((), (1,)):
            raise GraphError(f"{op.type} {node!r}: input {name!r} must be a scalar of shape [] or [1], got shape "
                             f"{list(h.shape)}")
    for in_index in op.refs.values():  # (no in-place op has a list input)
        h = pairs[in_index][2]
        # A ref output of another in-place op aliases that op's (already checked) writable input.
        if h is not None and h.node.type not in WRITABLE_SOURCES and h.index not in h.node.op.refs:
            raise GraphError(f"{op.type} {node!r}: input {pairs[in_index][0]!r} is written in place, so it must come "
                             f"from a {', '.join(WRITABLE_SOURCES)} node, got {h.node.type} {h.node.name!r}")
    given = {name: h for name, _, h in pairs if h is not None}
    for group, what, key in ((op.same_dtype, "dtype", lambda h: h.dtype), (op.same_shape, "shape",
                                                                           lambda h: list(h.shape))):
        present = [n for n in group if n in given]
        for n in present[1:]:
            if key(given[n]) != key(given[present[0]]):
                raise GraphError(f"{op.type} {node!r}: input {n!r} has {what} {key(given[n])} but {present[0]!r} "
                                 f"has {key(given[present[0]])}; {', '.join(group)} share one {what}")


def const_value(op: IrOp, node: str, handle, what: str) -> np.ndarray:
    """The value of the Const feeding input `what` (a shape, axes, multiples): graph_ir needs static shapes, so
    such inputs must be known when the graph is built (a Const, or a node whose value is known: Node.known_values)."""
    if handle.node.known_values is not None and handle.node.known_values[handle.index] is not None:
        return np.asarray(handle.node.known_values[handle.index])
    if handle.node.type != "Const":
        raise GraphError(f"{op.type} {node!r}: input {what!r} must come from a Const (static shapes), got "
                         f"{handle.node.type} {handle.node.name!r}")
    return np.asarray(handle.node.attrs["value"])


def known_or_none(handle) -> np.ndarray | None:
    """The value of a handle known while building (a Const's, or Node.known_values), else None."""
    if handle.node.known_values is not None and handle.node.known_values[handle.index] is not None:
        return np.asarray(handle.node.known_values[handle.index])
    return np.asarray(handle.node.attrs["value"]) if handle.node.type == "Const" else None


def const_scalar(op: IrOp, node: str, handle, what: str) -> np.generic:
    """The one value of the Const feeding input `what` (an axis, a count): shape [] or any shape of one element (TF's
    kernels read such inputs as a scalar; an empty or longer Const is refused, as TF refuses it)."""
    value = const_value(op, node, handle, what)
    if value.size != 1:
        raise GraphError(f"{op.type} {node!r}: input {what!r} must hold one value, got a Const of shape "
                         f"{list(value.shape)}")
    return value.reshape(-1)[0]


def const_dims(op: IrOp, node: str, handle, what: str) -> list[int]:
    """The dims held by the Const feeding `what` (Reshape's shape, Fill's dims)."""
    value = const_value(op, node, handle, what)
    if value.ndim > 1 or value.size > 64:
        raise GraphError(f"{op.type} {node!r}: input {what!r} must be a list of at most 64 dims, got shape "
                         f"{list(value.shape)}")
    return [int(d) for d in value.reshape(-1)]


def broadcast_shape(op: IrOp, node: str, inputs) -> tuple[int, ...]:
    """The shape the inputs broadcast to (NumPy's and TensorFlow's rule); an error names the node otherwise."""
    shapes = [h.shape for h in inputs if h is not None]
    rank = max(len(s) for s in shapes)
    out = []
    for k in range(rank):
        dims = {s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0} - {1}
        if len(dims) > 1:
            raise GraphError(f"{op.type} {node!r}: input shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def check_shape(node: str, field: str, shape: Sequence[int]) -> tuple[int, ...]:
    """Static shapes only: rank <= 64, every dim >= 0."""
    dims = tuple(int(d) for d in shape)
    if len(dims) > 64:
        raise GraphError(f"node {node!r}: {field} has rank {len(dims)}; at most 64 is supported")
    if any(d < 0 for d in dims):
        raise GraphError(f"node {node!r}: {field} has shape {list(dims)}; graph_ir needs static shapes (dims >= 0)")
    return dims
