"""The slicing family's executors (prototypes: graph_ir/opset/slicing.py): exact data movement, each result a new
array the size of the node's output. The sums keep TF's CPU order: MirrorPadGrad folds the margins dim by dim as
tensorflow/core/kernels/image/mirror_pad_op.h does, ScatterNd adds repeated indices in index order, Cumsum
accumulates along the axis one element after the other (Eigen's scan)."""

from __future__ import annotations

import math

import numpy as np

from graph_ir.executors.common import at_dtype
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Node
from graph_ir.opset.array import strided_slice_index
from graph_ir.opset.slicing import mirror_offset, reverse_axes, slice_sizes
from graph_ir.opset.splitting import concat_offsets, split_sizes


def _pad(node: Node, args) -> list[np.ndarray]:
    """Paddings computed in the step (TF's SliceGrad at a computed begin) are checked as TF's PadOp checks them
    (tensorflow/core/kernels/pad_op.cc: non-negative), before anything is written; their sums per dim are y's
    static dims by construction (graph_ir/opset/slicing.py)."""
    pads = args[1].reshape(-1, 2).tolist()
    shape = tuple(d + a + b for d, (a, b) in zip(args[0].shape, pads))
    if any(min(p) < 0 for p in pads) or shape != node.output_descs[0].shape:
        raise GraphError(f"{node.type} {node.name!r}: paddings {pads} must be non-negative and pad x "
                         f"{list(args[0].shape)} to y's shape {list(node.output_descs[0].shape)}, as TF's Pad checks")
    if node.type == "MirrorPad":
        mode = "reflect" if node.attrs["mode"] == "REFLECT" else "symmetric"
        return [np.pad(args[0], pads, mode=mode)]
    fill = args[2].reshape(()) if node.type == "PadV2" else 0
    return [np.pad(args[0], pads, constant_values=fill)]


def _mirror_pad_grad(node: Node, args) -> list[np.ndarray]:
    """TF's fold: per dim, the left margin reversed is added next to it, then the right one; later dims work on the
    interior of the earlier ones only."""
    scratch = np.array(args[0], copy=True)
    offset = mirror_offset(node.op, node.name, node.attrs["mode"])
    with np.errstate(all="ignore"):
        for axis, (before, after) in enumerate(args[1].reshape(-1, 2).tolist()):
            size = scratch.shape[axis]

            def part(start: int, stop: int, axis=axis) -> tuple:
                return (slice(None),) * axis + (slice(start, stop),)

            if before > 0:
                scratch[part(before + offset, 2 * before + offset)] += np.flip(scratch[part(0, before)], axis)
            if after > 0:
                start = size - 2 * after - offset
                scratch[part(start, start + after)] += np.flip(scratch[part(size - after, size)], axis)
            scratch = scratch[part(before, size - after)]
    return [np.ascontiguousarray(scratch)]


def _slice(node: Node, args) -> list[np.ndarray]:
    x, begin = args[0], args[1].reshape(-1).tolist()
    sizes = slice_sizes(node.op, node.name, x.shape, begin, args[2].reshape(-1).tolist())  # run-time offsets too
    return [np.array(x[tuple(slice(b, b + s) for b, s in zip(begin, sizes))], copy=True)]


def _parts(x: np.ndarray, axis: int, sizes: list[int]) -> list[np.ndarray]:
    bounds = np.cumsum(sizes)[:-1]
    return [np.array(p, copy=True) for p in np.split(x, bounds, axis=axis)]


def _split(node: Node, args) -> list[np.ndarray]:
    x, count = args[1], node.attrs["num_split"]
    axis = int(args[0].reshape(-1)[0]) % x.ndim
    return _parts(x, axis, [x.shape[axis] // count] * count)


def _split_v(node: Node, args) -> list[np.ndarray]:
    x = args[0]
    axis = int(args[2].reshape(-1)[0]) % x.ndim
    return _parts(x, axis, split_sizes(node.op, node.name, args[1].reshape(-1).tolist(), x.shape[axis]))


def _unpack(node: Node, args) -> list[np.ndarray]:
    x = args[0]
    axis = node.attrs["axis"] % x.ndim
    return [np.array(np.take(x, k, axis=axis), copy=True) for k in range(x.shape[axis])]


def _concat_offset(node: Node, args) -> list[np.ndarray]:
    offsets = concat_offsets(node.op, node.name, int(args[0].reshape(-1)[0]), [a.tolist() for a in args[1:]])
    return [at_dtype(node, k, o) for k, o in enumerate(offsets)]


def _strided_slice_grad(node: Node, args) -> list[np.ndarray]:
    """TF's kernel: dy written where StridedSlice reads (TF's clamping, negative indices from the end). Begin and end
    may be computed in the step: a range whose slice has not dy's shape (an index out of range, a clamped range) is
    refused naming the node before anything is written, as TF's kernel refuses it."""
    shape, dy = node.output_descs[0].shape, args[4]
    index = strided_slice_index(node.op, node.name, len(shape), *args[1:4], node.attrs)
    try:
        sliced = np.broadcast_to(np.zeros((), np.int8), shape)[index].shape  # a view: no memory
    except IndexError as e:
        raise GraphError(f"StridedSliceGrad {node.name!r}: begin {args[1].tolist()}, end {args[2].tolist()}: {e} "
                         f"(shape is {list(shape)})") from None
    if sliced != dy.shape:
        raise GraphError(f"StridedSliceGrad {node.name!r}: begin {args[1].tolist()} and end {args[2].tolist()} take "
                         f"a slice of shape {list(sliced)} from {list(shape)}, but dy has shape {list(dy.shape)}")
    out = np.zeros(shape, dy.dtype)
    out[index] = dy  # basic indexing: written in place
    return [out]


def _strided_slice_assign(node: Node, args) -> list[np.ndarray]:
    """TF's StridedSliceAssign (tensorflow/core/kernels/strided_slice_op.cc, StridedSliceAssignOp): input_value
    written in place where StridedSlice reads (TF's clamping, negative indices from the end). An empty slice writes
    nothing, whatever input_value's shape, as TF's kernel skips it; any other slice must have input_value's shape,
    and an index out of range (a shrunk axis) or a slice of another shape is refused naming the node before anything
    is written."""
    var, value = args[0], args[4]
    index = strided_slice_index(node.op, node.name, var.ndim, *args[1:4], node.attrs)
    try:
        sliced = np.shape(var[index])  # basic indexing: a view, no copy
    except IndexError as e:
        raise GraphError(f"StridedSliceAssign {node.name!r}: begin {args[1].tolist()}, end {args[2].tolist()}: {e} "
                         f"(var's shape is {list(var.shape)})") from None
    if math.prod(sliced) and sliced != value.shape:
        raise GraphError(f"StridedSliceAssign {node.name!r}: begin {args[1].tolist()} and end {args[2].tolist()} "
                         f"take a slice of shape {list(sliced)} from var {list(var.shape)}, but input_value has "
                         f"shape {list(value.shape)}")
    if math.prod(sliced):
        var[index] = value
    return [var]


def _invert_permutation(node: Node, args) -> list[np.ndarray]:
    x = args[0]
    if x.size and (x.min() < 0 or x.max() >= x.size or np.unique(x).size != x.size):
        raise GraphError(f"InvertPermutation {node.name!r}: x {x.tolist()[:16]} is not a permutation of 0..{x.size - 1}")
    y = np.empty_like(x)
    y[x] = np.arange(x.size, dtype=x.dtype)
    return [y]


def index_rows(node: Node, indices: np.ndarray, shape: tuple[int, ...], what: str) -> np.ndarray:
    """The row of each index tuple in a tensor of `shape` viewed as [prod(shape[:depth]), rest]; an index out of
    range is an error naming it, as on TF's CPU."""
    depth = indices.shape[-1]
    flat = indices.reshape(math.prod(indices.shape[:-1]), depth).astype(np.int64)
    bad = ((flat < 0) | (flat >= np.asarray(shape[:depth], np.int64))).any(axis=1)
    if bad.any():
        k = int(np.argmax(bad))
        raise GraphError(f"{node.type} {node.name!r}: indices[{k}] = {flat[k].tolist()} does not index into {what} "
                         f"of shape {list(shape)}")
    if depth == 0:
        return np.zeros(flat.shape[0], np.int64)
    return np.ravel_multi_index(tuple(flat.T), shape[:depth])


def _gather_nd(node: Node, args) -> list[np.ndarray]:
    x, indices = args
    out_shape = node.output_descs[0].shape
    count = math.prod(indices.shape[:-1])
    if count and x.size == 0:  # TF's CPU kernel refuses to gather from an empty tensor
        raise GraphError(f"GatherNd {node.name!r}: requested {count} slices, but x of shape {list(x.shape)} is empty")
    rows = index_rows(node, indices, x.shape, "x")
    depth = indices.shape[-1]
    table = x.reshape(math.prod(x.shape[:depth]), math.prod(x.shape[depth:]))
    return [table[rows].reshape(out_shape)]


def _scatter_nd(node: Node, args) -> list[np.ndarray]:
    indices, updates = args[0], args[1]
    shape = node.output_descs[0].shape
    depth = indices.shape[-1]
    out = np.zeros((math.prod(shape[:depth]), math.prod(shape[depth:])), updates.dtype)
    rows = index_rows(node, indices, shape, "shape")
    with np.errstate(all="ignore"):
        np.add.at(out, rows, updates.reshape(rows.size, out.shape[1]))  # in index order, as TF's CPU kernel adds
    return [out.reshape(shape)]


def _tensor_scatter_update(node: Node, args) -> list[np.ndarray]:
    x, indices, updates = args
    depth = indices.shape[-1]
    out = np.array(x, copy=True).reshape(math.prod(x.shape[:depth]), math.prod(x.shape[depth:]))
    rows = index_rows(node, indices, x.shape, "x")
    values = updates.reshape(rows.size, out.shape[1])
    # TF's CPU kernel writes the updates in order: for a repeated index, the last one stays.
    last = rows.size - 1 - np.unique(rows[::-1], return_index=True)[1]
    out[rows[last]] = values[last]
    return [out.reshape(x.shape)]


def _reverse(node: Node, args) -> list[np.ndarray]:
    axes = reverse_axes(node.op, node.name, args[1], args[0].ndim)
    return [np.array(np.flip(args[0], axes), copy=True)]


def _cumsum(node: Node, args) -> list[np.ndarray]:
    x, axis = args[0], int(args[1].reshape(-1)[0]) % max(args[0].ndim, 1)
    if node.attrs["reverse"]:
        x = np.flip(x, axis)
    with np.errstate(all="ignore"):
        y = np.cumsum(x, axis=axis, dtype=x.dtype)  # NumPy's accumulate is sequential along the axis, as Eigen's scan
    if node.attrs["exclusive"]:  # the sum before each element: the inclusive sums shifted by one
        lead = (slice(None),) * axis
        shifted = np.zeros_like(y)
        shifted[lead + (slice(1, None),)] = y[lead + (slice(None, -1),)]
        y = shifted
    if node.attrs["reverse"]:
        y = np.flip(y, axis)
    return [np.ascontiguousarray(y)]


EXECUTORS = {
    "Pad": _pad,
    "PadV2": _pad,
    "MirrorPad": _pad,
    "MirrorPadGrad": _mirror_pad_grad,
    "Slice": _slice,
    "Split": _split,
    "SplitV": _split_v,
    "Unpack": _unpack,
    "ConcatOffset": _concat_offset,
    "StridedSliceGrad": _strided_slice_grad,
    "StridedSliceAssign": _strided_slice_assign,
    "InvertPermutation": _invert_permutation,
    "GatherNd": _gather_nd,
    "ScatterNd": _scatter_nd,
    "TensorScatterUpdate": _tensor_scatter_update,
    "ReverseV2": _reverse,
    "Cumsum": _cumsum,
}
