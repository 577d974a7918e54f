"""The matrix family's executors (prototypes: graph_ir/opset/matrix.py). All exact: they select and move values, so
their one right answer is TensorFlow's, bit for bit (NaN payloads and signed zeros carried as they are)."""

from __future__ import annotations

import numpy as np

from graph_ir.executors.common import Executor
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Node
from graph_ir.opset.matrix import max_diag_len


def _k(k: np.ndarray) -> tuple[int, int]:
    ks = k.reshape(-1)
    return int(ks[0]), int(ks[-1])


def diagonal_places(rows: int, cols: int, lo: int, hi: int, length: int,
                    align: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Where the band's [count, length] grid of diagonal slots sits in the matrix (TF's matrix_diag_op.cc): slot
    (i, p) holds diagonal d = hi - i, element t = p - offset(d) at row t + max(0, -d), column row + d; offset is 0
    for a left-aligned diagonal, length - len(d) for a right-aligned one (superdiagonals by align's first word,
    subdiagonals by its second, the main diagonal left if either says LEFT). Returns (slot i, p, row, column) of
    the slots that hold an element."""
    left_super, left_sub = (word == "LEFT" for word in align.split("_"))
    d = hi - np.arange(hi - lo + 1)[:, None]
    lengths = np.minimum(rows + np.minimum(d, 0), cols - np.maximum(d, 0))
    left = ((d >= 0) & left_super) | ((d <= 0) & left_sub)
    t = np.arange(length)[None, :] - np.where(left, 0, length - lengths)
    held = (t >= 0) & (t < lengths)
    i, p = np.nonzero(held)
    row = t[i, p] + np.maximum(-d[i, 0], 0)
    return i, p, row, row + d[i, 0]


def _diag_part(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, k, padding = args
    lo, hi = _k(k)
    rows, cols = x.shape[-2:]
    length = max(max_diag_len(rows, cols, lo, hi), 0)
    y = np.full((*x.shape[:-2], hi - lo + 1, length), padding.reshape(()), dtype=x.dtype)
    i, p, r, c = diagonal_places(rows, cols, lo, hi, length, node.attrs["align"])
    y[..., i, p] = x[..., r, c]
    return [y.reshape(node.output_descs[0].shape)]


def _diag(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, k, _, _, padding = args
    lo, hi = _k(k)
    rows, cols = node.output_descs[0].shape[-2:]
    y = np.full(node.output_descs[0].shape, padding.reshape(()), dtype=x.dtype)
    diagonals = x.reshape((*x.shape[:-1], 1, x.shape[-1])) if lo == hi else x
    i, p, r, c = diagonal_places(rows, cols, lo, hi, x.shape[-1], node.attrs["align"])
    y[..., r, c] = diagonals[..., i, p]
    return [y]


def _set_diag(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, diagonal, k = args
    lo, hi = _k(k)
    rows, cols = x.shape[-2:]
    y = x.copy()
    diagonals = diagonal.reshape((*diagonal.shape[:-1], 1, diagonal.shape[-1])) if lo == hi else diagonal
    i, p, r, c = diagonal_places(rows, cols, lo, hi, diagonal.shape[-1], node.attrs["align"])
    y[..., r, c] = diagonals[..., i, p]
    return [y]


def _band_part(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """x where the element is inside the band, else 0 (TF's kernel writes zeros there: NaN and -0.0 outside the
    band become +0). num_lower > rows or num_upper > cols is refused, as TF refuses it."""
    x, lower, upper = args
    lower, upper = int(lower.reshape(-1)[0]), int(upper.reshape(-1)[0])
    rows, cols = x.shape[-2:]
    if lower > rows or upper > cols:
        raise GraphError(f"MatrixBandPart {node.name!r}: num_lower {lower} / num_upper {upper} exceed the "
                         f"{rows}x{cols} matrices (TF requires num_lower <= rows, num_upper <= cols)")
    below = np.arange(rows)[:, None] - np.arange(cols)[None, :]  # i - j
    inside = ((lower < 0) | (below <= lower)) & ((upper < 0) | (-below <= upper))
    return [np.where(inside, x, np.zeros((), x.dtype))]


def _top_k(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """A stable sort, as TF's kernel orders them (value, then lower index first: its stable comparator). NaN is
    refused: TF's comparator is no strict weak order with NaN, so where NaN lands is its sort's accident."""
    x, k = args
    count = int(k.reshape(-1)[0])
    axis = node.attrs["dim"] % x.ndim
    keys = x.astype(np.float32) if x.dtype.itemsize == 2 and x.dtype.kind in "fV" else x
    if keys.dtype.kind == "f" and np.isnan(keys).any():
        raise GraphError(f"TopKV2 {node.name!r}: x holds NaN; TF's order for NaN is unspecified (its CPU kernel's "
                         "comparator is no strict weak order with NaN), so graph_ir refuses rather than guess")
    if node.attrs["largest"]:
        keys = -keys if keys.dtype.kind == "f" else ~keys  # order-reversing and exact (~ for ints: no overflow)
    order = np.argsort(keys, axis=axis, kind="stable")
    indices = np.take(order, np.arange(count), axis=axis)
    return [np.take_along_axis(x, indices, axis=axis), indices.astype(np.int32)]


def _roll(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x = args[0]
    shifts, dims = node.attrs["shifts"], node.attrs["dims"]
    if not dims:
        return [np.roll(x.reshape(-1), int(shifts[0])).reshape(x.shape)]
    total: dict[int, int] = {}
    for shift, dim in zip(shifts, dims):  # shifts on one axis add up (TF's Roll)
        axis = dim % x.ndim
        total[axis] = total.get(axis, 0) + int(shift)
    if x.size == 0 or not total:
        return [x.copy()]
    return [np.roll(x, [s % x.shape[a] for a, s in total.items()], axis=list(total))]


def _grid_bytes(node: Node, diagonals) -> int:
    """diagonal_places's index arrays: about a dozen int64 / bool arrays the size of the band's slot grid."""
    return 12 * 8 * int(np.prod(diagonals[-2:], dtype=np.int64))


def _diag_workspace(node: Node) -> int:
    """The slot grid, plus the gathered diagonals (the size of the diagonals input or output) before they are
    written into place."""
    descs = [h.desc for h in node.inputs] + list(node.output_descs)
    diagonals = descs[-1] if node.type == "MatrixDiagPartV3" else descs[0] if node.type == "MatrixDiagV3" else descs[1]
    band = diagonals.shape if len(diagonals.shape) >= 2 else (1, *diagonals.shape)
    return _grid_bytes(node, band) + diagonals.nbytes


def _band_part_workspace(node: Node) -> int:
    rows, cols = node.output_descs[0].shape[-2:]
    return 24 * rows * cols  # i - j (int64), the comparisons and the mask (bool)


def _top_k_workspace(node: Node) -> int:
    """The keys (widened, then negated: two copies of at most 8 bytes an element), the stable argsort's int64 order
    and its merge buffer, the k taken indices (int64)."""
    x, values = node.inputs[0].desc, node.output_descs[0]
    row = x.shape[node.attrs["dim"] % len(x.shape)] if x.shape else 1
    return x.num_elements * 24 + values.num_elements * 8 + row * 8


WORKSPACE = {"MatrixBandPart": _band_part_workspace, "MatrixDiagPartV3": _diag_workspace,
             "MatrixDiagV3": _diag_workspace, "MatrixSetDiagV3": _diag_workspace, "TopKV2": _top_k_workspace,
             "Roll": lambda node: node.output_descs[0].nbytes}  # np.roll's shifted copy of the flattened x

EXECUTORS: dict[str, Executor] = {
    "MatrixBandPart": _band_part,
    "MatrixDiagPartV3": _diag_part,
    "MatrixDiagV3": _diag,
    "MatrixSetDiagV3": _set_diag,
    "TopKV2": _top_k,
    "Roll": _roll,
}
