"""The TensorList family's TF -> GE mappings (prototypes: graph_ir/opset/tensorlist.py), onto the GE ops of the same
names, as Ascend's TF adapter maps them (TF's list_ops.cc and GE's list_ops.h declare the same inputs).

GE graphs here have static shapes, so the lowering keeps what it knows of each list handle (ListInfo: element dtype,
the element shape TF's list holds, the element shape its elements have, and its length when fixed) and gives the
ops that read elements (TensorListGetItem, TensorListPopBack, TensorListStack) a fully defined Const element_shape:
TF's own element_shape input merged with what the list's producers say (the shape of a pushed or set tensor, the
tensor a list was made from, the shape a list was reserved with). TensorListStack's length is TF's num_elements, or
the list's fixed length. A read whose shape is still unknown is a LoweringError naming the node.
TensorListElementShape becomes the Const of the element shape TF's list holds (it never changes after the list is
made). Lists that cross If/While subgraphs carry their ListInfo along (graph_ir/lowering/control.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graph_ir.executors.folding import popped_constant
from graph_ir.ir.dtypes import DType
from graph_ir.ir.errors import LoweringError
from graph_ir.ir.nodes import Handle
from graph_ir.lowering.ops.common import maps_to, tf_attr

Shape = tuple[int, ...] | None  # None: unknown rank; -1: an unknown dim


@dataclass(frozen=True)
class ListInfo:
    """What the lowering knows of a list handle (None: not known)."""

    dtype: DType | None = None
    declared: Shape = None  # the element_shape TF's list value holds (TensorListElementShape's answer)
    known_declared: bool = False  # whether `declared` is known (None is also a declared value: unknown rank)
    shape: Shape = None  # the shape its elements have, as far as known
    length: int | None = None
    # The one value every element holds, when each was pushed from the same Const (dtype str, shape, bytes): what
    # tf.while_loop's gradient pops back, e.g. the lengths and shapes its forward loop accumulated.
    constant: tuple | None = None


UNKNOWN = ListInfo()


def merge(a: Shape, b: Shape, where: str) -> Shape:
    """The most defined shape compatible with both (TF's PartialTensorShape::MergeWith)."""
    if a is None or b is None:
        return b if a is None else a
    if len(a) != len(b) or any(x >= 0 and y >= 0 and x != y for x, y in zip(a, b)):
        raise LoweringError(f"{where}: element shapes {list(a)} and {list(b)} are incompatible")
    return tuple(x if x >= 0 else y for x, y in zip(a, b))


def shape_value(value) -> Shape:
    """TF's element_shape tensor as a Shape: a scalar -1 is an unknown rank."""
    array = np.asarray(value)
    dims = tuple(int(d) for d in array.reshape(-1))
    return None if array.ndim == 0 and dims == (-1,) else dims


def info(ctx, handle: Handle) -> ListInfo:
    """What is known of the list `handle` holds, through the Identities TF passes lists on with."""
    while handle not in ctx.tensor_lists and handle.node.type in ("Identity", "IdentityN"):
        handle = handle.node.inputs[handle.index if handle.node.type == "IdentityN" else 0]
    return ctx.tensor_lists.get(handle, UNKNOWN)


def as_constant(value) -> tuple | None:
    return None if value is None else (value.dtype.str, value.shape, value.tobytes())


def from_constant(constant: tuple) -> np.ndarray:
    dtype, shape, data = constant
    return np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape).copy()


def _where(ctx) -> str:
    return f"TF {ctx.current.op} {ctx.current.name!r}"


def _const_shape(ctx, handle: Handle) -> Shape:
    value = ctx.value(handle)
    return shape_value(value) if value is not None else None


def _dtype(ctx, node) -> DType:
    return tf_attr(node, "element_dtype")


def _add(ctx, ge_type: str, inputs: list[Handle], attrs: dict, suffix: str = ""):
    """A GE node for the TF node being lowered, never folded into a Const (a list is not a constant tensor)."""
    return ctx.graph.add_node(ge_type, inputs, attrs, name=ctx._name(suffix), control_inputs=ctx.current_controls)


def _record(ctx, node, new: ListInfo):
    """Keeps what is known of the list `node` outputs first; returns the node."""
    ctx.tensor_lists[node.output(0)] = new
    return node


def _read_shape(ctx, lst: ListInfo, element_shape: Handle | None) -> tuple[int, ...]:
    """The fully defined element shape a read gives (the list's, merged with TF's element_shape input)."""
    shape = merge(lst.shape, _const_shape(ctx, element_shape) if element_shape is not None else None, _where(ctx))
    if shape is None or min(shape, default=0) < 0:
        raise LoweringError(f"{_where(ctx)} reads list elements of shape {shape if shape is None else list(shape)}, "
                            "which is not fully known when lowering; GE graphs here have static shapes")
    return shape


def _shape_const(ctx, shape: tuple[int, ...], suffix: str = "element_shape") -> Handle:
    return ctx.const(np.array(shape, dtype=np.int32), suffix)


def _read_shape_input(ctx, lst: ListInfo, element_shape: Handle | None, suffix: str = "element_shape") -> Handle:
    """The element_shape input of a read: the Const of the shape the lowering resolved or, when dims are known only
    at run time (a probe lowering, graph_ir/dynamic), TF's own input (or a rank of -1s), which GE's infer completes
    from what the list's producers hold at each call's shapes (graph_ir/opset/tensorlist.py)."""
    shape = _read_shape(ctx, lst, element_shape)
    if ctx.probe is None:
        return _shape_const(ctx, shape, suffix)
    if element_shape is not None and element_shape.dtype.name == "int32":
        return element_shape
    return _shape_const(ctx, (-1,) * len(shape), suffix)


@maps_to("EmptyTensorList")
def _empty(ctx, node, inputs):
    declared = _const_shape(ctx, inputs[0])
    ge = _add(ctx, "EmptyTensorList", inputs, {"element_dtype": _dtype(ctx, node)})
    return _record(ctx, ge, ListInfo(_dtype(ctx, node), declared, ctx.value(inputs[0]) is not None,
                                               declared, 0))


@maps_to("TensorListReserve")
def _reserve(ctx, node, inputs):
    declared, count = _const_shape(ctx, inputs[0]), ctx.value(inputs[1])
    ge = _add(ctx, "TensorListReserve", inputs, {"element_dtype": _dtype(ctx, node),
                                                 "shape_type": tf_attr(node, "shape_type")})
    length = int(np.asarray(count).reshape(-1)[0]) if count is not None else None
    return _record(ctx, ge, ListInfo(_dtype(ctx, node), declared, ctx.value(inputs[0]) is not None,
                                               declared, length))


@maps_to("TensorListFromTensor")
def _from_tensor(ctx, node, inputs):
    tensor = inputs[0]
    declared = _const_shape(ctx, inputs[1])
    shape = merge(tuple(tensor.shape[1:]), declared, _where(ctx))
    ge = _add(ctx, "TensorListFromTensor", inputs, {"element_dtype": _dtype(ctx, node)})
    return _record(ctx, ge, ListInfo(_dtype(ctx, node), declared, ctx.value(inputs[1]) is not None,
                                               shape, tensor.shape[0] if tensor.shape else None))


@maps_to("TensorListGetItem")
def _get_item(ctx, node, inputs):
    handle, index, element_shape = inputs
    return _add(ctx, "TensorListGetItem", [handle, index, _read_shape_input(ctx, info(ctx, handle), element_shape)],
                {"element_dtype": _dtype(ctx, node)})


@maps_to("TensorListSetItem")
def _set_item(ctx, node, inputs):
    if tf_attr(node, "resize_if_index_out_of_bounds", False):
        raise LoweringError(f"{_where(ctx)}: resize_if_index_out_of_bounds=True has no GE counterparts (GE's "
                            "TensorListSetItem has no such attribute)")
    handle, _, item = inputs
    lst = info(ctx, handle)
    ge = _add(ctx, "TensorListSetItem", inputs, {"element_dtype": _dtype(ctx, node)})
    return _record(ctx, ge, ListInfo(_dtype(ctx, node), lst.declared, lst.known_declared,
                                               merge(lst.shape, tuple(item.shape), _where(ctx)), lst.length))


@maps_to("TensorListPushBack")
def _push_back(ctx, node, inputs):
    handle, tensor = inputs
    lst = info(ctx, handle)
    ge = _add(ctx, "TensorListPushBack", inputs, {"element_dtype": _dtype(ctx, node)})
    length = lst.length + 1 if lst.length is not None else None
    value = as_constant(ctx.value(tensor))
    constant = value if value is not None and (lst.length == 0 or lst.constant == value) else None
    return _record(ctx, ge, ListInfo(_dtype(ctx, node), lst.declared, lst.known_declared,
                                     merge(lst.shape, tuple(tensor.shape), _where(ctx)), length, constant))


@maps_to("TensorListPopBack")
def _pop_back(ctx, node, inputs):
    handle, element_shape = inputs
    lst = info(ctx, handle)
    ge = _add(ctx, "TensorListPopBack", [handle, _read_shape_input(ctx, lst, element_shape)],
              {"element_dtype": _dtype(ctx, node)})
    length = lst.length - 1 if lst.length else None
    _record(ctx, ge, ListInfo(_dtype(ctx, node), lst.declared, lst.known_declared, lst.shape, length, lst.constant))
    if ctx.probe is not None:  # the popped value is known at this size only: the node stays, its value known
        ge.known_values = popped_constant(ge)
        return ge
    if lst.constant is not None:  # every element is that Const: the popped one is too
        return [ge.output(0), ctx.const(from_constant(lst.constant), "value")]
    return ge


@maps_to("TensorListStack")
def _stack(ctx, node, inputs):
    handle, element_shape = inputs
    lst = info(ctx, handle)
    shape_input = _read_shape_input(ctx, lst, element_shape)
    count = tf_attr(node, "num_elements", -1)
    if ctx.probe is not None and count < 0:  # the length GE's infer knows from the list at each call's shapes
        return _add(ctx, "TensorListStack", [handle, shape_input], {"element_dtype": _dtype(ctx, node)})
    if count < 0:
        count = lst.length
    elif lst.length is not None and lst.length != count:
        raise LoweringError(f"{_where(ctx)}: num_elements is {count}, but the list holds {lst.length} elements")
    if count is None:
        raise LoweringError(f"{_where(ctx)}: the stacked list's length is not known when lowering (TF's num_elements "
                            "is -1 and the list's length changes at run time); GE graphs here have static shapes")
    return _add(ctx, "TensorListStack", [handle, shape_input],
                {"element_dtype": _dtype(ctx, node), "num_elements": int(count)})


@maps_to("TensorListLength")
def _length(ctx, node, inputs):
    """A Const when the list's length is known when lowering (TF's gradients size their lists with it)."""
    length = info(ctx, inputs[0]).length
    if ctx.probe is not None:  # a node whose value is known at the probe size (graph_ir/executors/folding.py)
        return ctx.add("TensorListLength", inputs, {})
    if length is not None:
        return [ctx.const(np.array(length, np.int32))]
    return _add(ctx, "TensorListLength", inputs, {})


@maps_to("Const")
def _element_shape(ctx, node, inputs):
    lst = info(ctx, inputs[0])
    if not lst.known_declared:
        raise LoweringError(f"{_where(ctx)}: the list's element shape is not known when lowering")
    dtype = tf_attr(node, "shape_type").numpy
    return [ctx.const(np.array(-1 if lst.declared is None else lst.declared, dtype=dtype))]


LOWERINGS = {
    "EmptyTensorList": _empty,
    "TensorListReserve": _reserve,
    "TensorListFromTensor": _from_tensor,
    "TensorListGetItem": _get_item,
    "TensorListSetItem": _set_item,
    "TensorListPushBack": _push_back,
    "TensorListPopBack": _pop_back,
    "TensorListStack": _stack,
    "TensorListLength": _length,
    "TensorListElementShape": _element_shape,
}
