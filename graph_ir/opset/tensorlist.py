"""The TensorList family's GE prototypes, as CANN's REG_OPs declare them (metadef's list_ops.h; third_party/cann/
ge_reg_ops.txt copies them verbatim): EmptyTensorList, TensorListReserve, TensorListFromTensor, TensorListGetItem,
TensorListSetItem, TensorListPushBack, TensorListPopBack, TensorListStack, TensorListLength. A list handle is a
scalar of dtype variant (graph_ir/dtypes.py). What TF's tf.TensorArray, Keras's RNN loop and tf.while_loop's gradient
accumulators build on.

graph_ir's shapes are static, so an op that reads an element out (GetItem, PopBack, Stack) takes its element shape
from its Const `element_shape` input, which must be fully defined (the lowering resolves it from what it knows of
the list, graph_ir/lowering/ops/tensorlist.py); Stack's length is its `num_elements` attribute, which must be set.
Executors: graph_ir/executors/tensorlist.py."""

from __future__ import annotations

from graph_ir.dtypes import VARIANT, as_dtype
from graph_ir.errors import GraphError
from graph_ir.nodes import TensorDesc
from graph_ir.registry import INDICES, IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.verify import const_value

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


def element_shape(op: IrOp, node: str, handle) -> tuple[int, ...]:
    """The fully defined element shape in the Const `element_shape` input (graph_ir's shapes are static)."""
    value = const_value(op, node, handle, "element_shape")
    dims = [int(d) for d in value.reshape(-1)]
    if value.ndim != 1 or any(d < 0 for d in dims):
        raise GraphError(f"{op.type} {node!r}: input 'element_shape' must be a fully defined shape (a 1-D Const of "
                         f"dims >= 0) to give a static output shape, got {value.tolist()}")
    return tuple(dims)


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
    return [TensorDesc(op.outputs[0].name, VARIANT, ())]


def _read(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    dtype = element_dtype(op, node, attrs)
    if inputs[0].shape != ():
        raise GraphError(f"{op.type} {node!r}: input 'input_handle' must be one list handle, got "
                         f"{list(inputs[0].shape)}")
    shape = element_shape(op, node, inputs[-1])
    if op.type == "TensorListGetItem":
        if inputs[1].desc.num_elements != 1:
            raise GraphError(f"TensorListGetItem {node!r}: input 'index' must be a scalar, got "
                             f"{list(inputs[1].shape)}")
        return [TensorDesc("item", dtype, shape)]
    if op.type == "TensorListPopBack":
        return [TensorDesc("output_handle", VARIANT, ()), TensorDesc("tensor", dtype, shape)]
    if attrs["num_elements"] < 0:
        raise GraphError(f"TensorListStack {node!r}: attribute 'num_elements' is {attrs['num_elements']}; graph_ir's "
                         "shapes are static, so the stacked length must be given (>= 0)")
    return [TensorDesc("tensor", dtype, (attrs["num_elements"], *shape))]


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
