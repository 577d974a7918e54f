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

from graph_ir.dtypes import DType
from graph_ir.errors import LoweringError
from graph_ir.lowering.ops.common import maps_to, tf_attr
from graph_ir.nodes import Handle

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
    shape = _read_shape(ctx, info(ctx, handle), element_shape)
    return _add(ctx, "TensorListGetItem", [handle, index, _shape_const(ctx, shape)],
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
    shape = _read_shape(ctx, lst, element_shape)
    ge = _add(ctx, "TensorListPopBack", [handle, _shape_const(ctx, shape)], {"element_dtype": _dtype(ctx, node)})
    length = lst.length - 1 if lst.length else None
    _record(ctx, ge, ListInfo(_dtype(ctx, node), lst.declared, lst.known_declared, lst.shape, length, lst.constant))
    if lst.constant is not None:  # every element is that Const: the popped one is too
        return [ge.output(0), ctx.const(from_constant(lst.constant), "value")]
    return ge


@maps_to("TensorListStack")
def _stack(ctx, node, inputs):
    handle, element_shape = inputs
    lst = info(ctx, handle)
    shape = _read_shape(ctx, lst, element_shape)
    count = tf_attr(node, "num_elements", -1)
    if count < 0:
        count = lst.length
    elif lst.length is not None and lst.length != count:
        raise LoweringError(f"{_where(ctx)}: num_elements is {count}, but the list holds {lst.length} elements")
    if count is None:
        raise LoweringError(f"{_where(ctx)}: the stacked list's length is not known when lowering (TF's num_elements "
                            "is -1 and the list's length changes at run time); GE graphs here have static shapes")
    return _add(ctx, "TensorListStack", [handle, _shape_const(ctx, shape)],
                {"element_dtype": _dtype(ctx, node), "num_elements": int(count)})


@maps_to("TensorListLength")
def _length(ctx, node, inputs):
    """A Const when the list's length is known when lowering (TF's gradients size their lists with it)."""
    length = info(ctx, inputs[0]).length
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


def zeros_like(tensor_lowering):
    """TF's ZerosLike, which on a list handle is TF's TensorListZerosLike (tensorflow/core/kernels/list_kernels.h): a
    list of the same length and declared element shape whose elements are zeros of the elements' shapes. What
    tf.while_loop's gradient starts a loop list's gradient from; lowered as TensorListFromTensor of zeros, the
    list's length and element shape being known when lowering. Any other tensor: `tensor_lowering`."""

    @maps_to(tensor_lowering.ge_type)
    def lower(ctx, node, inputs):
        if inputs[0].dtype.name != "variant":
            return tensor_lowering(ctx, node, inputs)
        lst = info(ctx, inputs[0])
        shape = _read_shape(ctx, lst, None)
        if lst.length is None or lst.dtype is None or not lst.known_declared:
            raise LoweringError(f"{_where(ctx)}: zeros like a list whose length, element dtype or element shape is not "
                                "known when lowering")
        zero = ctx.const(np.zeros((), lst.dtype.numpy), "zero")
        zeros = ctx.add("Fill", [ctx.const(np.array([lst.length, *shape], np.int64), "dims"), zero], suffix="zeros")
        zeros = zeros if isinstance(zeros, list) else [zeros.output(0)]
        return _from_stacked(ctx, zeros[0], lst, shape)

    return lower


def _from_stacked(ctx, stacked: Handle, lst: ListInfo, shape: tuple[int, ...]):
    """TensorListFromTensor of `stacked`, declared with the element shape `lst` declares."""
    declared = ctx.const(np.array(-1 if lst.declared is None else lst.declared, np.int32), "element_shape")
    ge = _add(ctx, "TensorListFromTensor", [stacked, declared], {"element_dtype": lst.dtype})
    return _record(ctx, ge, ListInfo(lst.dtype, lst.declared, True, shape, lst.length))


def add_n(tensor_lowering):
    """TF's AddN, which on list handles is TF's TensorListBinaryAdd (tensorflow/core/kernels/list_kernels.h): the
    lists' elements added one by one (what tf.while_loop's gradient sums two gradients of a loop list with);
    lowered as the stacked lists added (unset elements read as zeros) and made a list again, the lists' length and
    element shape being known when lowering. Any other tensors: `tensor_lowering`."""

    @maps_to(tensor_lowering.ge_type)
    def lower(ctx, node, inputs):
        if inputs[0].dtype.name != "variant":
            return tensor_lowering(ctx, node, inputs)
        lists = [info(ctx, h) for h in inputs]
        first = lists[0]
        shape = first.shape
        for lst in lists[1:]:
            shape = merge(shape, lst.shape, _where(ctx))
        if any(lst.length is None or lst.length != first.length for lst in lists) or first.dtype is None or \
                not first.known_declared or shape is None or min(shape, default=0) < 0:
            raise LoweringError(f"{_where(ctx)}: adds lists whose lengths or element shapes are not known (and equal) "
                                "when lowering")
        stacked = [_add(ctx, "TensorListStack", [h, _shape_const(ctx, shape, f"element_shape_{k}")],
                        {"element_dtype": first.dtype, "num_elements": first.length}, suffix=f"stack_{k}").output(0)
                   for k, h in enumerate(inputs)]
        total = ctx.add("AddN", stacked, {"N": len(stacked)}, suffix="sum")
        total = total[0] if isinstance(total, list) else total.output(0)
        return _from_stacked(ctx, total, first, shape)

    return lower


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
