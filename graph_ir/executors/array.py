"""The array family's executors (prototypes: graph_ir/opset/array.py): exact data movement, plus the shape ops,
which read only their inputs' static shapes (so the lowering folds them into Consts)."""

from __future__ import annotations

import math

import numpy as np

from graph_ir.executors.common import at_dtype
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Node
from graph_ir.opset.array import (
    broadcast_args,
    broadcast_gradient_args,
    gather_dims,
    strided_slice_index,
    transpose_perm,
)
from graph_ir.opset.ranges import range_values


def _shape(node: Node, args) -> list[np.ndarray]:
    shape = node.inputs[0].shape
    return [at_dtype(node, 0, int(np.prod(shape, dtype=np.int64)) if node.type == "Size" else list(shape))]


def _shape_n(node: Node, args) -> list[np.ndarray]:
    return [at_dtype(node, k, list(h.shape)) for k, h in enumerate(node.inputs)]


def _broadcast_gradient_args(node: Node, args) -> list[np.ndarray]:
    r0, r1 = broadcast_gradient_args(node.op, node.name, args[0].reshape(-1).tolist(), args[1].reshape(-1).tolist())
    return [at_dtype(node, 0, r0), at_dtype(node, 1, r1)]


def _broadcast_args(node: Node, args) -> list[np.ndarray]:
    return [at_dtype(node, 0, broadcast_args(node.op, node.name, args[0].reshape(-1).tolist(),
                                             args[1].reshape(-1).tolist()))]


def _reshaped(node: Node, args) -> list[np.ndarray]:
    return [args[0].reshape(node.output_descs[0].shape)]  # ExpandDims and Squeeze: a view


def _one_value(node: Node, value: np.ndarray, what: str) -> int:
    """An axis or count input's one value (the prototype checked its Const; a fed one is checked here)."""
    if value.size != 1:
        raise GraphError(f"{node.type} {node.name!r}: input {what!r} must hold one value, got shape "
                         f"{list(value.shape)}")
    return int(value.reshape(-1)[0])


def _concat(node: Node, args) -> list[np.ndarray]:
    axis = _one_value(node, args[-1], "concat_dim") % args[0].ndim
    return [np.concatenate(args[:-1], axis=axis)]


def _gather(node: Node, args) -> list[np.ndarray]:
    x, indices = args[0], args[1]
    axis, batch = gather_dims(node.op, node.name, x.shape, indices.shape, _one_value(node, args[2], "axis"),
                              node.attrs["batch_dims"])
    size = x.shape[axis]
    bad = (indices < 0) | (indices >= size)
    if bad.any():  # TF's CPU kernel refuses them too
        raise GraphError(f"GatherV2 {node.name!r}: indices[{int(np.argmax(bad.reshape(-1)))}] = "
                         f"{int(indices.reshape(-1)[np.argmax(bad.reshape(-1))])} is not in [0, {size})")
    if batch == 0:
        return [np.take(x, indices, axis=axis)]
    # batch b reads its own slices: x [B, pre, size, post] at indices [B, I] -> [B, pre, I, post]
    count, pre, post = math.prod(x.shape[:batch]), math.prod(x.shape[batch:axis]), math.prod(x.shape[axis + 1:])
    rows = x.reshape(count, pre, size, post)
    picks = indices.reshape(count, 1, math.prod(indices.shape[batch:]))
    y = rows[np.arange(count)[:, None, None], np.arange(pre)[None, :, None], picks]
    return [y.reshape(node.output_descs[0].shape)]


def _strided_slice(node: Node, args) -> list[np.ndarray]:
    index = strided_slice_index(node.op, node.name, args[0].ndim, *args[1:], node.attrs)
    return [np.ascontiguousarray(args[0][index]).reshape(node.output_descs[0].shape)]


def check_segment_ids(node: Node, flat_ids: np.ndarray, count: int) -> None:
    """Ids >= num_segments are refused, as TF's CPU kernels refuse them (negative ones are dropped)."""
    too_big = flat_ids >= count
    if too_big.any():
        k = int(np.argmax(too_big))
        raise GraphError(f"{node.type} {node.name!r}: segment_ids[{k}] = {int(flat_ids[k])} is out of range "
                         f"[0, {count}) (num_segments)")


def _unsorted_segment_sum(node: Node, args) -> list[np.ndarray]:
    x, ids = args[0], args[1]
    out = np.zeros(node.output_descs[0].shape, x.dtype)
    flat_ids = ids.reshape(-1)
    rows = x.reshape(flat_ids.size, *x.shape[ids.ndim:])
    check_segment_ids(node, flat_ids, out.shape[0])
    keep = flat_ids >= 0
    with np.errstate(all="ignore"):
        np.add.at(out, flat_ids[keep], rows[keep])  # in index order, as TF's CPU kernel accumulates
    return [out]


EXECUTORS = {
    "Shape": _shape,
    "Size": _shape,
    "ShapeN": _shape_n,
    "BroadcastGradientArgs": _broadcast_gradient_args,
    "BroadcastArgs": _broadcast_args,
    "ExpandDims": _reshaped,
    "Squeeze": _reshaped,
    "Tile": lambda node, args: [np.tile(args[0], args[1].reshape(-1).tolist())],
    "BroadcastTo": lambda node, args: [np.ascontiguousarray(np.broadcast_to(args[0], node.output_descs[0].shape))],
    "Range": lambda node, args: [range_values(node.name, *args)],
    "Transpose": lambda node, args: [np.ascontiguousarray(np.transpose(
        args[0], transpose_perm(node.op, node.name, args[1].reshape(-1).tolist(), args[0].ndim)))],
    "ConcatV2": _concat,
    "Pack": lambda node, args: [np.stack(args, axis=node.attrs["axis"] % (args[0].ndim + 1))],
    "GatherV2": _gather,
    "StridedSlice": _strided_slice,
    "UnsortedSegmentSum": _unsorted_segment_sum,
    "Fill": lambda node, args: [np.full(node.output_descs[0].shape, args[1].reshape(()),
                                        node.output_descs[0].dtype.numpy)],
    "ZerosLike": lambda node, args: [np.zeros_like(args[0])],
    "OnesLike": lambda node, args: [np.ones_like(args[0])],
}

# Ops whose result depends only on their inputs' static shapes: the lowering always folds them.
SHAPE_ONLY = frozenset({"Shape", "Size", "ShapeN"})
