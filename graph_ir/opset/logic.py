"""The logic family's GE prototypes, as CANN's REG_OPs declare them (hicann/ops-math math/*/op_graph/*_proto.h and
metadef's array_ops.h): what the Keras metrics and losses compute besides arithmetic: boolean ops (LogicalAnd,
LogicalOr, LogicalNot, ReduceAll, ReduceAny), bit ops (Bitcast, BitwiseAnd: Keras's argmax tests the sign bit),
indices (ArgMaxV2, ArgMin, OneHot, InTopKV2; MatrixDiagPartV3 is graph_ir/opset/matrix.py's), ClipByValue, Ceil and the float
classifiers IsFinite, IsNan, IsInf.
Executors: graph_ir/executors/logic.py; TF mappings: graph_ir/lowering/ops/logic.py."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import ALL_DTYPES, INDICES, IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import check_shape, const_value
from graph_ir.opset.math import NUMBERS, reduced_axes

BOOL = ("bool",)
INTEGERS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")  # CANN's IntegerDataType
BASIC = tuple(d for d in ALL_DTYPES if d != "bool")  # CANN's BasicType, as far as graph_ir holds it
# Bitcast's explicit list (no bfloat16).
BITCAST = ("bool", "float16", "float32", "int8", "int32", "uint32", "uint8", "int64", "uint64", "int16", "uint16",
           "float64")

for _type in ("LogicalAnd", "LogicalOr"):
    register(IrOp(_type, (IrInput("x1", BOOL), IrInput("x2", BOOL)), (IrOutput("y", BOOL),), outputs_from="broadcast",
                  doc=f"y = x1 {'and' if _type == 'LogicalAnd' else 'or'} x2, broadcast."))
register(IrOp("LogicalNot", (IrInput("x", BOOL),), (IrOutput("y", BOOL),), outputs_from="same", doc="y = not x."))
register(IrOp("BitwiseAnd", (IrInput("x1", INTEGERS), IrInput("x2", INTEGERS)), (IrOutput("y", INTEGERS),),
              outputs_from="broadcast", same_dtype=("x1", "x2"), doc="y = x1 & x2, broadcast."))
register(IrOp("ClipByValue", (IrInput("x", NUMBERS), IrInput("clip_value_min", NUMBERS),
                              IrInput("clip_value_max", NUMBERS)), (IrOutput("y", NUMBERS),),
              outputs_from="broadcast", same_dtype=("x", "clip_value_min", "clip_value_max"),
              doc="y = max(min(x, clip_value_max), clip_value_min), broadcast."))
for _type, _dtypes in (("IsFinite", ("bfloat16", "float16", "float32", "float64")),
                       ("IsNan", ("float16", "float32", "float64")), ("IsInf", ("float16", "float32", "float64"))):
    register(IrOp(_type, (IrInput("x", _dtypes),), (IrOutput("y", BOOL),), outputs_from="infer",
                  infer=lambda op, node, inputs, attrs: [TensorDesc("y", as_dtype("bool"), inputs[0].shape)],
                  doc=f"y = {_type}(x), bool."))


_FLOATING = ("float16", "float32", "float64")  # CANN's FloatingDataType
register(IrOp("Ceil", (IrInput("x", _FLOATING),), (IrOutput("y", _FLOATING),),
              outputs_from="same", doc="y = the smallest integer value not below x."))


def _in_top_k(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    predictions, targets, k = inputs
    if len(predictions.shape) != 2 or targets.shape != predictions.shape[:1] or k.desc.num_elements != 1:
        raise GraphError(f"InTopKV2 {node!r}: predictions must be [batch, classes], targets [batch] and k one value, "
                         f"got {list(predictions.shape)}, {list(targets.shape)} and {list(k.shape)}")
    return [TensorDesc("precision", as_dtype("bool"), targets.shape)]


register(IrOp("InTopKV2", (IrInput("predictions", ("float32",)), IrInput("targets", INDICES), IrInput("k", INDICES)),
              (IrOutput("precision", BOOL),), outputs_from="infer", infer=_in_top_k, same_dtype=("targets", "k"),
              doc="precision = whether fewer than k predictions of the row beat the target's (False where a "
                  "prediction of the row is not finite or the target is out of range)."))


def bitcast_shape(op: IrOp, node: str, x: TensorDesc, dtype) -> tuple[int, ...]:
    """TF's Bitcast shape rule: same size keeps the shape; to a narrower type adds a last axis of the size ratio; to
    a wider type removes a last axis that must be the ratio."""
    src, dst = np.dtype(x.dtype.numpy).itemsize, np.dtype(as_dtype(dtype).numpy).itemsize
    if src == dst:
        return tuple(x.shape)
    if src > dst:
        return (*x.shape, src // dst)
    if not x.shape or x.shape[-1] != dst // src:
        raise GraphError(f"Bitcast {node!r}: x {x.dtype}{list(x.shape)} to {dtype} needs a last axis of "
                         f"{dst // src}")
    return tuple(x.shape[:-1])


def _bitcast(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    if attrs["keep_dim"]:
        raise GraphError(f"Bitcast {node!r}: keep_dim=True is not supported (TF's Bitcast never sets it)")
    if attrs["type"].name not in BITCAST:
        raise GraphError(f"Bitcast {node!r}: attribute 'type' is {attrs['type']}, expected one of {', '.join(BITCAST)}")
    for field, dtype in (("input 'x'", inputs[0].dtype), ("attribute 'type'", attrs["type"])):
        if dtype.name == "bool":  # GE's REG_OP lists bool; TF's Bitcast (array_ops.cc) does not
            raise GraphError(f"Bitcast {node!r}: {field} is bool, which TF's Bitcast refuses")
    return [TensorDesc("y", attrs["type"], bitcast_shape(op, node, inputs[0], attrs["type"]))]


register(IrOp("Bitcast", (IrInput("x", BITCAST),), (IrOutput("y", BITCAST),),
              (IrAttr("type", "type", required=True), IrAttr("keep_dim", "bool", False)), outputs_from="infer",
              infer=_bitcast, doc="y = x's bytes read as `type` (no conversion)."))


def arg_axis(op: IrOp, node: str, x, dimension) -> int:
    """The Const axis of ArgMaxV2 / ArgMin, made non-negative."""
    axis = const_value(op, node, dimension, "dimension").reshape(-1)
    rank = len(x.shape)
    if axis.size != 1 or not -rank <= int(axis[0]) < rank:
        raise GraphError(f"{op.type} {node!r}: dimension {axis.tolist()} must be one axis of rank {rank}")
    return int(axis[0]) % rank


def _arg(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, dimension = inputs
    axis = arg_axis(op, node, x, dimension)
    if attrs["dtype"].name not in INDICES:
        raise GraphError(f"{op.type} {node!r}: attribute 'dtype' is {attrs['dtype']}, expected int32 or int64")
    return [TensorDesc("y", attrs["dtype"], tuple(d for k, d in enumerate(x.shape) if k != axis))]


for _type in ("ArgMaxV2", "ArgMin"):
    register(IrOp(_type, (IrInput("x", NUMBERS), IrInput("dimension", INDICES)), (IrOutput("y", INDICES),),
                  (IrAttr("dtype", "type", "int64"),), outputs_from="infer", infer=_arg,
                  doc=f"y = the index of the first {'largest' if _type == 'ArgMaxV2' else 'smallest'} element along "
                      "the Const `dimension`."))


def _one_hot(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, depth, on, off = inputs
    d = const_value(op, node, depth, "depth").reshape(-1)
    rank = len(x.shape) + 1
    axis = attrs["axis"]
    if d.size != 1 or int(d[0]) < 0:
        raise GraphError(f"OneHot {node!r}: depth must be one int >= 0, got {d.tolist()}")
    if not -1 <= axis < rank:
        raise GraphError(f"OneHot {node!r}: axis {axis} must be -1 or in [0, {rank})")
    if on.shape != () or off.shape != () or on.dtype != off.dtype:  # TF's one_hot_op.cc: a [1] value is refused
        raise GraphError(f"OneHot {node!r}: on_value and off_value must be scalars (shape []) of one dtype, got "
                         f"{on.dtype}{list(on.shape)} and {off.dtype}{list(off.shape)}")
    axis = axis % rank
    return [TensorDesc("y", on.dtype, check_shape(node, "y", (*x.shape[:axis], int(d[0]), *x.shape[axis:])))]


register(IrOp("OneHot", (IrInput("x", ("uint8", "int32", "int64")), IrInput("depth", INDICES),
                         IrInput("on_value", BASIC), IrInput("off_value", BASIC)), (IrOutput("y", BASIC),),
              (IrAttr("axis", "int", -1),), outputs_from="infer", infer=_one_hot, same_dtype=("on_value", "off_value"),
              doc="y = on_value where the new `axis` index equals x, else off_value."))


def _reduce_bool(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    axes = reduced_axes(op, node, len(x.shape), inputs[1])
    shape = tuple(1 if k in axes else d for k, d in enumerate(x.shape)) if attrs["keep_dims"] else \
        tuple(d for k, d in enumerate(x.shape) if k not in axes)
    return [TensorDesc("y", x.dtype, shape)]


for _type, _what in (("ReduceAll", "and"), ("ReduceAny", "or")):
    register(IrOp(_type, (IrInput("x", BOOL), IrInput("axes", INDICES)), (IrOutput("y", BOOL),),
                  (IrAttr("keep_dims", "bool", False),), outputs_from="infer", infer=_reduce_bool,
                  doc=f"y = logical {_what} of x over the Const `axes` (kept as size 1 with keep_dims)."))
