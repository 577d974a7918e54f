"""The TensorList family's GE prototypes, as CANN's REG_OPs declare them (metadef's list_ops.h; third_party/cann/
ge_reg_ops.txt copies them verbatim): EmptyTensorList, TensorListReserve, TensorListFromTensor, TensorListGetItem,
TensorListSetItem, TensorListPushBack, TensorListPopBack, TensorListStack, TensorListLength. A list handle is a
scalar of dtype variant (graph_ir/ir/dtypes.py). What TF's tf.TensorArray, Keras's RNN loop and tf.while_loop's gradient
accumulators build on.

graph_ir's shapes are static, so an op that reads an element out (GetItem, PopBack, Stack) must know its element
shape: its Const `element_shape` input, merged with what the handle's desc says the list holds (ListMeta: the shape of
the tensor a list was made from, of the items set or pushed, its length; kept by these infer functions, and joined
across a loop's iterations by graph_ir/opset/control.py). Stack's length is its `num_elements` attribute, or the
list's known length when that is -1. The lowering resolves both when it can (graph_ir/lowering/ops/tensorlist.py);
a template graph (graph_ir/dynamic) leaves them to the list's producers at each call's shapes.
Executors: graph_ir/executors/tensorlist.py."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.dtypes import VARIANT, as_dtype
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import ListMeta, TensorDesc, merged
from graph_ir.ir.registry import INDICES, IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import const_value, known_or_none

# CANN's element lists, as far as graph_ir holds their dtypes (no qint, string or complex; no bfloat16 in CANN's).
ELEMENTS = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "bool")
HANDLE = ("variant",)
INT32 = ("int32",)
_ELEMENT_DTYPE = IrAttr("element_dtype", "type", "int32")


def element_dtype(op: IrOp, node: str, attrs) -> object:
    dtype = attrs["element_dtype"]
    if dtype.name not in ELEMENTS:
        raise GraphError(f"{op.type} {node!r}: attribute 'element_dtype' is {dtype}, expected one of "
                         f"{', '.join(ELEMENTS)}")
    return dtype


def _shape_of(value) -> tuple[int, ...] | None:
    """TF's element_shape tensor as a shape: a scalar -1 (or any scalar) is an unknown rank."""
    if value is None or np.ndim(value) != 1:
        return None
    return tuple(int(d) for d in np.reshape(value, -1))


def element_shape(op: IrOp, node: str, handle, held: ListMeta | None) -> tuple[int, ...]:
    """The fully defined element shape a read gives: the Const `element_shape` input, merged with the shape the
    list is known to hold (`held`) where the input leaves dims unknown."""
    value = const_value(op, node, handle, "element_shape")
    given = _shape_of(value)
    if given is None or any(d < 0 for d in given):
        given = merged(given, held.shape if held is not None else None)
    if given is None or value.ndim > 1 or any(d < 0 for d in given):
        raise GraphError(f"{op.type} {node!r}: input 'element_shape' must be a fully defined shape (a 1-D Const of "
                         f"dims >= 0) to give a static output shape, got {value.tolist()}, and the list is not known "
                         f"to hold a shape that completes it ({held.shape if held is not None else 'nothing known'})")
    return tuple(given)


def _held(op: IrOp, inputs, attrs) -> ListMeta:
    """What the list made by this op (Empty, Reserve, FromTensor, SetItem, PushBack) holds."""
    declared = {h_port.name: h for h_port, h in zip(op.inputs, inputs)}
    if op.type in ("EmptyTensorList", "TensorListReserve"):
        count = known_or_none(declared["num_elements"]) if op.type == "TensorListReserve" else np.int32(0)
        return ListMeta(_shape_of(known_or_none(declared["element_shape"])),
                        None if count is None or np.size(count) != 1 else int(np.reshape(count, -1)[0]))
    if op.type == "TensorListFromTensor":
        tensor = declared["tensor"].shape
        return ListMeta(merged(tuple(tensor[1:]), _shape_of(known_or_none(declared["element_shape"]))), tensor[0])
    held = declared["input_handle"].desc.list_meta or ListMeta()
    item = declared["item" if op.type == "TensorListSetItem" else "tensor"]
    if op.type == "TensorListSetItem":
        return ListMeta(merged(held.shape, item.shape), held.length)
    value = known_or_none(item)
    pushed = None if value is None else (value.dtype.str, value.shape, value.tobytes())
    constant = pushed if pushed is not None and (held.length == 0 or held.constant == pushed) else None
    return ListMeta(merged(held.shape, item.shape), None if held.length is None else held.length + 1, constant)


def _handle(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    element_dtype(op, node, attrs)
    for h, port in zip(inputs, op.inputs):
        if port.dtypes == HANDLE and h.shape != ():
            raise GraphError(f"{op.type} {node!r}: input {port.name!r} must be one list handle (shape []), got "
                             f"{list(h.shape)}")
        if port.name in ("item", "tensor") and h.dtype != attrs["element_dtype"]:
            raise GraphError(f"{op.type} {node!r}: input {port.name!r} is {h.dtype}, but element_dtype is "
                             f"{attrs['element_dtype']}")
        if port.name in ("index", "num_elements", "max_num_elements") and h.desc.num_elements != 1:
            raise GraphError(f"{op.type} {node!r}: input {port.name!r} must be a scalar, got {list(h.shape)}")
    if op.type == "TensorListFromTensor" and not inputs[0].shape:
        raise GraphError(f"TensorListFromTensor {node!r}: input 'tensor' must have rank >= 1 (its first axis lists "
                         "the elements), got a scalar")
    return [TensorDesc(op.outputs[0].name, VARIANT, (), _held(op, inputs, attrs))]


def _read(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    dtype = element_dtype(op, node, attrs)
    if inputs[0].shape != ():
        raise GraphError(f"{op.type} {node!r}: input 'input_handle' must be one list handle, got "
                         f"{list(inputs[0].shape)}")
    held = inputs[0].desc.list_meta
    shape = element_shape(op, node, inputs[-1], held)
    if op.type == "TensorListGetItem":
        if inputs[1].desc.num_elements != 1:
            raise GraphError(f"TensorListGetItem {node!r}: input 'index' must be a scalar, got "
                             f"{list(inputs[1].shape)}")
        return [TensorDesc("item", dtype, shape)]
    if op.type == "TensorListPopBack":
        length = held.length - 1 if held is not None and held.length else None
        meta = ListMeta(held.shape, length, held.constant) if held is not None else None
        return [TensorDesc("output_handle", VARIANT, (), meta),
                TensorDesc("tensor", dtype, shape)]
    count = attrs["num_elements"]
    if count < 0 and held is not None and held.length is not None:
        count = held.length  # (TF's num_elements -1: the list's own length, known here)
    if count < 0:
        raise GraphError(f"TensorListStack {node!r}: attribute 'num_elements' is {attrs['num_elements']} and the "
                         "list's length is not known; graph_ir's shapes are static, so the stacked length must be "
                         "known (>= 0)")
    return [TensorDesc("tensor", dtype, (count, *shape))]


def _length(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    return [TensorDesc("length", as_dtype("int32"), ())]


def _op(op_type: str, inputs, outputs, attrs, infer, doc: str) -> None:
    register(IrOp(op_type, tuple(inputs), tuple(outputs), tuple(attrs), outputs_from="infer", infer=infer, doc=doc))


_op("EmptyTensorList", [IrInput("element_shape", INDICES), IrInput("max_num_elements", INT32)],
    [IrOutput("handle", HANDLE)], [_ELEMENT_DTYPE], _handle,
    "handle = an empty list of element_dtype tensors of element_shape (-1: unknown rank), holding at most "
    "max_num_elements (-1: no bound).")
_op("TensorListReserve", [IrInput("element_shape", INDICES), IrInput("num_elements", INT32)],
    [IrOutput("handle", HANDLE)], [_ELEMENT_DTYPE, IrAttr("shape_type", "type", "int32")], _handle,
    "handle = a list of num_elements unset elements (read as zeros).")
_op("TensorListFromTensor", [IrInput("tensor", ELEMENTS), IrInput("element_shape", INDICES)],
    [IrOutput("output_handle", HANDLE)], [_ELEMENT_DTYPE], _handle,
    "output_handle = the list [tensor[0], tensor[1], ...].")
_op("TensorListGetItem", [IrInput("input_handle", HANDLE), IrInput("index", INT32), IrInput("element_shape", INT32)],
    [IrOutput("item", ELEMENTS)], [_ELEMENT_DTYPE], _read,
    "item = input_handle[index] (zeros of element_shape when unset).")
_op("TensorListSetItem", [IrInput("input_handle", HANDLE), IrInput("index", INT32), IrInput("item", ELEMENTS)],
    [IrOutput("output_handle", HANDLE)], [_ELEMENT_DTYPE], _handle,
    "output_handle = input_handle with element index set to item (a new list; the input is unchanged).")
_op("TensorListPushBack", [IrInput("input_handle", HANDLE), IrInput("tensor", ELEMENTS)],
    [IrOutput("output_handle", HANDLE)], [_ELEMENT_DTYPE], _handle,
    "output_handle = input_handle + [tensor].")
_op("TensorListPopBack", [IrInput("input_handle", HANDLE), IrInput("element_shape", INT32)],
    [IrOutput("output_handle", HANDLE), IrOutput("tensor", ELEMENTS)], [_ELEMENT_DTYPE], _read,
    "output_handle, tensor = input_handle[:-1], input_handle[-1].")
_op("TensorListStack", [IrInput("input_handle", HANDLE), IrInput("element_shape", INT32)],
    [IrOutput("tensor", ELEMENTS)], [_ELEMENT_DTYPE, IrAttr("num_elements", "int", -1)], _read,
    "tensor = the list's elements stacked on a new first axis (num_elements of them).")
_op("TensorListLength", [IrInput("input_handle", HANDLE)], [IrOutput("length", INT32)], [], _length,
    "length = the number of elements in the list (int32).")
