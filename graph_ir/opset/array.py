"""The array family's GE prototypes (CANN REG_OPs, declared in third_party/cann/ge_reg_ops.txt): shapes (Shape, ShapeN, Size,
BroadcastGradientArgs), reshaping (ExpandDims, Squeeze, Tile, Transpose, Fill), joining (ConcatV2, Pack), indexing
(GatherV2, StridedSlice, UnsortedSegmentSum). Shape-like inputs (axes, multiples, begin/end) must be Consts: graph_ir
graphs have static shapes. Executors: graph_ir/executors/array.py; TF mappings: graph_ir/lowering/ops/array.py."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.dtypes import from_ge
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import ALL_DTYPES, COMPLEX, INDICES, IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import broadcast_shape, check_shape, const_dims, const_scalar, const_value
from graph_ir.opset.ranges import range_length

BASIC = tuple(d for d in ALL_DTYPES if d != "bool")  # CANN's BasicType, as far as graph_ir holds it
WITH_BOOL = ALL_DTYPES
NO_BFLOAT16 = tuple(d for d in ALL_DTYPES if d != "bfloat16")  # the older REG_OPs' explicit lists (Shape, ExpandDims)
_ONES = tuple(d for d in ALL_DTYPES if not d.startswith("uint") or d == "uint8")
_SHAPE_DTYPE = IrAttr("dtype", "int", 3)  # a ge::DataType: DT_INT32 (3) or DT_INT64 (9)


def _shape_dtype(op: IrOp, node: str, attrs):
    dtype = from_ge(attrs["dtype"]) if attrs["dtype"] in (3, 9) else None
    if dtype is None:
        raise GraphError(f"{op.type} {node!r}: attribute 'dtype' must be DT_INT32 (3) or DT_INT64 (9), got "
                         f"{attrs['dtype']}")
    return dtype


def _check_fits(op: IrOp, node: str, dtype, values: list[int], what: str) -> None:
    """An int32 result must hold every dim (or the element count): TF's Shape, ShapeN and Size kernels
    (tensorflow/core/kernels/shape_ops.h) refuse a 32-bit output that would wrap."""
    if dtype.name == "int32" and any(v > 2**31 - 1 for v in values):
        raise GraphError(f"{op.type} {node!r}: {what} {values} does not fit the int32 output (attribute 'dtype' "
                         "DT_INT32); use DT_INT64 (9)")


def _shape(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    dtype, x = _shape_dtype(op, node, attrs), inputs[0]
    if op.type == "Size":
        _check_fits(op, node, dtype, [x.desc.num_elements], "x's element count")
        return [TensorDesc("y", dtype, ())]
    _check_fits(op, node, dtype, list(x.shape), "x's shape")
    return [TensorDesc("y", dtype, (len(x.shape),))]


def _shape_n(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    dtype = _shape_dtype(op, node, attrs)
    for k, h in enumerate(inputs):
        _check_fits(op, node, dtype, list(h.shape), f"x{k}'s shape")
    return [TensorDesc(f"y{k}", dtype, (len(h.shape),)) for k, h in enumerate(inputs)]


for _type in ("Shape", "Size"):
    register(IrOp(_type, (IrInput("x", NO_BFLOAT16),), (IrOutput("y", INDICES),), (_SHAPE_DTYPE,), outputs_from="infer",
                  infer=_shape, doc=f"y = the {'shape' if _type == 'Shape' else 'element count'} of x (static)."))
register(IrOp("ShapeN", (IrInput("x", NO_BFLOAT16, dynamic=True),), (IrOutput("y", INDICES, dynamic=True),),
              (_SHAPE_DTYPE,), outputs_from="infer", infer=_shape_n, doc="y_k = the shape of x_k (static)."))


def _broadcast_gradient_args(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    s0, s1 = (const_dims(op, node, h, name) for h, name in zip(inputs, ("x1", "x2")))
    r0, r1 = broadcast_gradient_args(op, node, s0, s1)
    return [TensorDesc("y1", inputs[0].dtype, (len(r0),)), TensorDesc("y2", inputs[0].dtype, (len(r1),))]


def broadcast_gradient_args(op: IrOp, node: str, s0: list[int], s1: list[int]) -> tuple[list[int], list[int]]:
    """The axes each input's gradient is summed over when the two shapes broadcast (TF's BroadcastGradientArgs)."""
    rank = max(len(s0), len(s1))
    a, b = [1] * (rank - len(s0)) + list(s0), [1] * (rank - len(s1)) + list(s1)
    r0, r1 = [], []
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y and 1 not in (x, y):
            raise GraphError(f"{op.type} {node!r}: shapes {s0} and {s1} do not broadcast")
        if x == 1 and y != 1:
            r0.append(k)
        if y == 1 and x != 1:
            r1.append(k)
        if x == y == 1:
            r0.append(k)
            r1.append(k)
    return r0, r1


def broadcast_args(op: IrOp, node: str, s0: list[int], s1: list[int]) -> list[int]:
    """The shape two shapes broadcast to (TF's BroadcastArgs: tf.broadcast_dynamic_shape, tf.linspace)."""
    broadcast_gradient_args(op, node, s0, s1)  # refuses shapes that do not broadcast
    rank = max(len(s0), len(s1))
    a, b = [1] * (rank - len(s0)) + list(s0), [1] * (rank - len(s1)) + list(s1)
    return [y if x == 1 else x for x, y in zip(a, b)]


def _broadcast_args(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    s0, s1 = (const_dims(op, node, h, name) for h, name in zip(inputs, ("x1", "x2")))
    return [TensorDesc("y", inputs[0].dtype, (len(broadcast_args(op, node, s0, s1)),))]


register(IrOp("BroadcastArgs", (IrInput("x1", INDICES), IrInput("x2", INDICES)), (IrOutput("y", INDICES),),
              outputs_from="infer", infer=_broadcast_args, same_dtype=("x1", "x2"),
              doc="y = the shape x1 and x2 broadcast to (Const shapes)."))
register(IrOp("BroadcastGradientArgs", (IrInput("x1", INDICES), IrInput("x2", INDICES)),
              (IrOutput("y1", INDICES), IrOutput("y2", INDICES)), outputs_from="infer", infer=_broadcast_gradient_args,
              same_dtype=("x1", "x2"), doc="y1, y2 = the axes to reduce each input's gradient over (Const shapes)."))


def _axis(op: IrOp, node: str, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise GraphError(f"{op.type} {node!r}: axis {axis} is out of range for rank {rank}")
    return axis % rank


def _expand_dims(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    axis = _axis(op, node, int(const_scalar(op, node, inputs[1], "axis")), len(x.shape) + 1)
    return [TensorDesc("y", x.dtype, (*x.shape[:axis], 1, *x.shape[axis:]))]


def _squeeze(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    axes = {_axis(op, node, a, len(x.shape)) for a in attrs["axis"]} or {k for k, d in enumerate(x.shape) if d == 1}
    if any(x.shape[a] != 1 for a in axes):
        raise GraphError(f"Squeeze {node!r}: cannot squeeze axes {sorted(axes)} of shape {list(x.shape)}")
    return [TensorDesc("y", x.dtype, tuple(d for k, d in enumerate(x.shape) if k not in axes))]


def _tile(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, multiples = inputs[0], const_dims(op, node, inputs[1], "multiples")
    if len(multiples) != len(x.shape) or min(multiples, default=0) < 0:
        raise GraphError(f"Tile {node!r}: multiples {multiples} must be {len(x.shape)} dims >= 0")
    return [TensorDesc("y", x.dtype, check_shape(node, "y", [d * m for d, m in zip(x.shape, multiples)]))]


def _broadcast_to(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, shape = inputs[0], tuple(const_dims(op, node, inputs[1], "shape"))
    target = TensorDesc("shape", x.dtype, check_shape(node, "shape", shape))
    if broadcast_shape(op, node, [x.desc, target]) != shape:
        raise GraphError(f"BroadcastTo {node!r}: x of shape {list(x.shape)} does not broadcast to {list(shape)}")
    return [TensorDesc("y", x.dtype, shape)]


def _range(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    values = [const_scalar(op, node, h, n) for h, n in zip(inputs, ("start", "limit", "delta"))]
    return [TensorDesc("y", inputs[0].dtype, (range_length(node, *values),))]  # the length only: nothing big


def transpose_perm(op: IrOp, node: str, perm: list[int], rank: int) -> list[int]:
    """`perm` with a negative entry counted from the end (rank added once, as TF's TransposeOp does), which must
    then be a permutation of 0 .. rank - 1."""
    wrapped = [p + rank if p < 0 else p for p in perm]
    if sorted(wrapped) != list(range(rank)):
        raise GraphError(f"Transpose {node!r}: perm {perm} is not a permutation of rank {rank} (entries in "
                         f"[{-rank}, {rank}), each axis once)")
    return wrapped


def _transpose(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    perm = transpose_perm(op, node, const_dims(op, node, inputs[1], "perm"), len(x.shape))
    return [TensorDesc("y", x.dtype, tuple(x.shape[p] for p in perm))]


def _concat(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    parts, rank = inputs[:-1], len(inputs[0].shape)
    axis = _axis(op, node, int(const_scalar(op, node, inputs[-1], "concat_dim")), rank)
    for k, h in enumerate(parts):
        if h.dtype != parts[0].dtype or len(h.shape) != rank or any(
                d != e for j, (d, e) in enumerate(zip(h.shape, parts[0].shape)) if j != axis):
            raise GraphError(f"ConcatV2 {node!r}: x{k} is {h.dtype}{list(h.shape)}, which does not join "
                             f"x0 {parts[0].dtype}{list(parts[0].shape)} on axis {axis}")
    shape = list(parts[0].shape)
    shape[axis] = sum(h.shape[axis] for h in parts)
    return [TensorDesc("y", parts[0].dtype, tuple(shape))]


def _pack(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    first = inputs[0]
    if any((h.dtype, h.shape) != (first.dtype, first.shape) for h in inputs):
        raise GraphError(f"Pack {node!r}: all inputs must share x0's dtype and shape {first.dtype}{list(first.shape)}")
    axis = _axis(op, node, attrs["axis"], len(first.shape) + 1)
    return [TensorDesc("y", first.dtype, (*first.shape[:axis], len(inputs), *first.shape[axis:]))]


def gather_dims(op: IrOp, node: str, x_shape, indices_shape, axis: int, batch_dims: int) -> tuple[int, int]:
    """(axis, batch_dims) made non-negative as TF's GatherV2 does (tensorflow/core/kernels/gather_op.cc: a negative
    batch_dims counts from indices' rank); the first batch_dims axes of x and indices are batch axes gathered
    pairwise, so they must agree, and axis must not be one of them."""
    axis = _axis(op, node, axis, len(x_shape))
    batch = batch_dims + len(indices_shape) if batch_dims < 0 else batch_dims
    if not 0 <= batch <= min(axis, len(indices_shape)) or tuple(x_shape[:batch]) != tuple(indices_shape[:batch]):
        raise GraphError(f"{op.type} {node!r}: batch_dims {batch_dims} for x {list(x_shape)}, indices "
                         f"{list(indices_shape)} and axis {axis}; expected 0 <= batch_dims <= axis and <= indices' "
                         f"rank (negative: from indices' rank), with x and indices agreeing on those leading axes")
    return axis, batch


def _gather(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, indices = inputs[0], inputs[1]
    axis, batch = gather_dims(op, node, x.shape, indices.shape, int(const_scalar(op, node, inputs[2], "axis")),
                              attrs["batch_dims"])
    return [TensorDesc("y", x.dtype, (*x.shape[:axis], *indices.shape[batch:], *x.shape[axis + 1:]))]


def strided_slice_index(op: IrOp, node: str, rank: int, begin, end, strides, attrs) -> tuple:
    """TF's StridedSlice semantics as a NumPy index (masks per bit; ellipsis and new axes included)."""
    begin, end, strides = (np.asarray(v).reshape(-1).tolist() for v in (begin, end, strides))
    if not len(begin) == len(end) == len(strides) or 0 in strides:
        raise GraphError(f"{op.type} {node!r}: begin, end and strides must have one length and no zero stride")
    index: list = []
    for k, (b, e, s) in enumerate(zip(begin, end, strides)):
        bit = 1 << k
        if attrs["ellipsis_mask"] & bit:
            index.append(Ellipsis)
        elif attrs["new_axis_mask"] & bit:
            index.append(None)
        elif attrs["shrink_axis_mask"] & bit:
            index.append(b)
        else:
            index.append(slice(None if attrs["begin_mask"] & bit else b, None if attrs["end_mask"] & bit else e, s))
    return tuple(index)


def _strided_slice(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    values = [const_value(op, node, h, name) for h, name in zip(inputs[1:], ("begin", "end", "strides"))]
    index = strided_slice_index(op, node, len(x.shape), *values, attrs)
    try:
        shape = np.broadcast_to(np.zeros((), np.int8), x.shape)[index].shape  # a view: no memory
    except IndexError as e:
        raise GraphError(f"StridedSlice {node!r}: {e} (x has shape {list(x.shape)})") from None
    return [TensorDesc("y", x.dtype, tuple(shape))]


def unsorted_segments(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    """The output of an unsorted segment reduction (x, segment_ids, num_segments): num_segments rows of x's slices."""
    x, ids = inputs[0], inputs[1]
    count = int(const_scalar(op, node, inputs[2], "num_segments"))
    if tuple(x.shape[:len(ids.shape)]) != tuple(ids.shape) or count < 0:
        raise GraphError(f"{op.type} {node!r}: segment_ids of shape {list(ids.shape)} must prefix x's "
                         f"shape {list(x.shape)}, and num_segments {count} be >= 0")
    return [TensorDesc("y", x.dtype, (count, *x.shape[len(ids.shape):]))]


_MASKS = tuple(IrAttr(f"{m}_mask", "int", 0) for m in ("begin", "end", "ellipsis", "new_axis", "shrink_axis"))
_AXIS_INPUT = IrInput("axis", INDICES)
for _op in (
    IrOp("ExpandDims", (IrInput("x", NO_BFLOAT16), _AXIS_INPUT), (IrOutput("y", NO_BFLOAT16),), outputs_from="infer",
         infer=_expand_dims, doc="y = x with a dimension of 1 inserted at the Const `axis`."),
    IrOp("Squeeze", (IrInput("x", WITH_BOOL),), (IrOutput("y", WITH_BOOL),), (IrAttr("axis", "list_int", []),),
         outputs_from="infer", infer=_squeeze, doc="y = x without its dimensions of 1 (those in `axis`, or all)."),
    IrOp("Tile", (IrInput("x", BASIC), IrInput("multiples", INDICES)), (IrOutput("y", BASIC),), outputs_from="infer",
         infer=_tile, doc="y = x repeated `multiples` times along each axis."),
    IrOp("BroadcastTo", (IrInput("x", WITH_BOOL), IrInput("shape", INDICES)), (IrOutput("y", WITH_BOOL),),
         outputs_from="infer", infer=_broadcast_to, doc="y = x broadcast to the Const `shape`."),
    IrOp("Range", tuple(IrInput(n, ("float16", "float32", "int32", "float64", "int64", "bfloat16"))
                        for n in ("start", "limit", "delta")), (IrOutput("y", ("float16", "float32", "int32", "float64",
                                                                              "int64", "bfloat16")),),
         outputs_from="infer", infer=_range, same_dtype=("start", "limit", "delta"),
         doc="y = start + i * delta below limit, in the dtype (Const inputs: a static length)."),
    IrOp("Transpose", (IrInput("x", BASIC), IrInput("perm", INDICES)), (IrOutput("y", BASIC),), outputs_from="infer",
         infer=_transpose, doc="y = x with its axes permuted by `perm`."),
    IrOp("ConcatV2", (IrInput("x", WITH_BOOL, dynamic=True), IrInput("concat_dim", INDICES)),
         (IrOutput("y", WITH_BOOL),), (IrAttr("N", "int", 1, minimum=1),), outputs_from="infer", infer=_concat,
         doc="y = the N tensors x joined along `concat_dim`."),
    IrOp("Pack", (IrInput("x", WITH_BOOL, dynamic=True),), (IrOutput("y", WITH_BOOL),),
         (IrAttr("axis", "int", 0), IrAttr("N", "int", required=True, minimum=1)), outputs_from="infer", infer=_pack,
         doc="y = the N tensors x stacked along a new axis `axis`."),
    IrOp("GatherV2", (IrInput("x", BASIC), IrInput("indices", INDICES), _AXIS_INPUT), (IrOutput("y", BASIC),),
         (IrAttr("batch_dims", "int", 0), IrAttr("is_preprocessed", "bool", False),
          IrAttr("negative_index_support", "bool", False)), outputs_from="infer", infer=_gather,
         doc="y = the slices of x at `indices` along `axis`, per batch of the first batch_dims axes (an index out of "
             "range is an error, as on TF's CPU)."),
    IrOp("StridedSlice", (IrInput("x", (*BASIC, *COMPLEX)), IrInput("begin", INDICES), IrInput("end", INDICES),
                          IrInput("strides", INDICES)), (IrOutput("y", (*BASIC, *COMPLEX)),), _MASKS, outputs_from="infer",
         infer=_strided_slice, doc="y = x[begin:end:strides] with TF's masks."),
    IrOp("UnsortedSegmentSum", (IrInput("x", BASIC), IrInput("segment_ids", INDICES),
                                IrInput("num_segments", INDICES)), (IrOutput("y", BASIC),),
         (IrAttr("is_preprocessed", "bool", False),), outputs_from="infer", infer=unsorted_segments,
         doc="y[i] = the sum of the x slices whose segment id is i (negative ids are dropped and ids >= "
             "num_segments refused, as on TF's CPU)."),
    IrOp("Fill", (IrInput("dims", INDICES), IrInput("value", ALL_DTYPES, scalar=True)), (IrOutput("y", ALL_DTYPES),),
         outputs_from="fill", doc="y = value everywhere, of shape dims."),
    IrOp("ZerosLike", (IrInput("x", BASIC),), (IrOutput("y", BASIC),), outputs_from="same", doc="y = zeros like x."),
    IrOp("OnesLike", (IrInput("x", _ONES),), (IrOutput("y", _ONES),), outputs_from="same",
         doc="y = ones like x."),
):
    register(_op)
