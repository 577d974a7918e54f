"""The logic family's executors (prototypes: graph_ir/opset/logic.py). All exact: booleans, bits, indices, selections
and comparisons have one right answer, which is TensorFlow's (ArgMax/ArgMin: the first index of the extreme value,
as Eigen's tuple reducers keep it; a NaN counts as TF's CPU kernel counts it, see _arg)."""

from __future__ import annotations

import numpy as np

from graph_ir.executors.common import Executor, at_dtype, elementwise
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Node


def _bitcast(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x = np.ascontiguousarray(args[0])
    # a copy: the session counts on non-aliasing ops' outputs being their own arrays (graph_ir/executors ALIASING)
    return [x.view(np.dtype(node.attrs["type"].numpy)).reshape(node.output_descs[0].shape).copy()]


def _arg(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """The first index of the max (min) along the axis; NaN is never the extreme, as TF's CPU kernel (Eigen's
    ArgMax/ArgMinTupleReducer compares with < and >, which NaN fails), unless the whole line is NaN (index 0)."""
    x, dimension = args
    axis = int(dimension.reshape(-1)[0]) % x.ndim
    if x.dtype.kind == "f" or x.dtype.kind == "V":
        x = x.astype(np.float64)
        fill = -np.inf if node.type == "ArgMaxV2" else np.inf
        x = np.where(np.isnan(x), fill, x)
    if x.shape[axis] == 0:
        raise GraphError(f"{node.type} {node.name!r}: reducing an axis of size 0 (TF refuses it too)")
    y = np.argmax(x, axis=axis) if node.type == "ArgMaxV2" else np.argmin(x, axis=axis)
    return [at_dtype(node, 0, y)]


def _in_top_k(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """TF's InTopK kernel: True where fewer than k classes have a prediction above the target's; False where the
    target is out of range or any prediction of the row (the target's included) is not finite."""
    predictions, targets, k = args
    rows = np.arange(targets.size)
    valid = (targets >= 0) & (targets < predictions.shape[1])
    target = predictions[rows, np.where(valid, targets, 0)]
    finite = np.all(np.isfinite(predictions), axis=1)
    above = np.sum(predictions > target[:, None], axis=1)
    return [valid & finite & (above < k.reshape(-1)[0])]


def _one_hot(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    indices, depth, on, off = args
    depth = int(np.asarray(depth).reshape(-1)[0])
    hot = indices[..., None] == np.arange(depth)  # out-of-range indices (negative too) give a row of off_value
    y = np.where(hot, on.reshape(()), off.reshape(()))
    axis = node.attrs["axis"]
    if axis != -1:
        y = np.moveaxis(y, -1, axis)
    return [at_dtype(node, 0, y)]


def _reduce_bool(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """np.all / np.any over the axes (an empty axis gives True / False, as TF's reducers' identities)."""
    x, axes = args
    rank = x.ndim
    axes = tuple(sorted({int(a) % rank for a in axes.reshape(-1)})) if rank else ()
    reduce = np.all if node.type == "ReduceAll" else np.any
    y = reduce(x, axis=axes, keepdims=node.attrs["keep_dims"]) if axes else x.copy()
    return [at_dtype(node, 0, y)]


def _keep_unless_below(x: np.ndarray, bound: np.ndarray, above: bool = False) -> np.ndarray:
    """x < bound ? bound : x (above: bound < x ? bound : x), std::max's (std::min's) choice of operand."""
    return np.where(bound < x if above else x < bound, bound, x)


EXECUTORS: dict[str, Executor] = {
    "LogicalAnd": elementwise(np.logical_and),
    "LogicalOr": elementwise(np.logical_or),
    "LogicalNot": elementwise(np.logical_not),
    "BitwiseAnd": elementwise(np.bitwise_and),
    # max(min(x, hi), lo) as std::min and std::max take them (TF's ClipByValue, cwise_op_clip.cc; measured at every
    # size): t = hi < x ? hi : x, then t < lo ? lo : t. So lo wins where lo > hi, NaN x stays NaN, a NaN bound is
    # ignored, and of two zeros the one already held (x, then t) stays.
    "ClipByValue": elementwise(lambda x, lo, hi: _keep_unless_below(_keep_unless_below(x, hi, above=True), lo)),
    "IsFinite": elementwise(np.isfinite),
    "IsNan": elementwise(np.isnan),
    "IsInf": elementwise(np.isinf),
    "Bitcast": _bitcast,
    "ArgMaxV2": _arg,
    "ArgMin": _arg,
    "OneHot": _one_hot,
    "InTopKV2": _in_top_k,
    "Ceil": elementwise(np.ceil),
    "ReduceAll": _reduce_bool,
    "ReduceAny": _reduce_bool,
}
