"""The matrix family's GE prototypes, as CANN's REG_OPs declare them (metadef's matrix_calculation_ops.h,
selection_ops.h, array_ops.h): band masks (MatrixBandPart: causal attention masks), diagonals (MatrixDiagV3: tf.eye
and the gradient of diag_part; MatrixDiagPartV3; MatrixSetDiagV3), TopKV2 (mixture-of-experts routing, triplet
mining) and Roll (Swin's shifted windows).

The diagonal ops take TF's V3 semantics (tensorflow/core/kernels/linalg/matrix_diag_op.cc): k is one diagonal or a
band [lo, hi]; a band's diagonals are stacked from hi down to lo, each max_diag_len long, the shorter ones aligned
left or right by `align` (superdiagonals by its first word, subdiagonals by its second) and padded.
Executors: graph_ir/executors/matrix.py; TF mappings: graph_ir/lowering/ops/matrix.py."""

from __future__ import annotations

import math

from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import ALL_DTYPES, IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import check_shape, const_scalar, const_value

BASIC = tuple(d for d in ALL_DTYPES if d != "bool")  # CANN's BasicType, as far as graph_ir holds it
BAND_PART = ("int8", "uint8", "int16", "uint16", "int32", "int64", "float16", "float32", "float64", "bool")
REAL_NUMBERS = ("float64", "float32", "float16", "int16", "int32", "int64", "int8", "uint16", "uint32", "uint64",
                "uint8", "bfloat16")  # CANN's RealNumberType
ROLL = ("float16", "float32", "int32", "uint32", "int8", "uint8", "bfloat16", "int64")
ALIGNS = ("LEFT_RIGHT", "RIGHT_LEFT", "LEFT_LEFT", "RIGHT_RIGHT")  # TF's (matrix_diag_op.cc ReadAlignment)
MAX_ELEMENTS = 2**31 - 1  # graph_ir's bound on a result these ops materialize (refused beyond, naming the node)


def _bounded(op: IrOp, node: str, field: str, shape) -> tuple[int, ...]:
    dims = check_shape(node, field, shape)
    if math.prod(dims) > MAX_ELEMENTS:
        raise GraphError(f"{op.type} {node!r}: {field} of shape {list(dims)} has {math.prod(dims)} elements; "
                         f"graph_ir holds at most {MAX_ELEMENTS}")
    return dims


def _scalar_int(op: IrOp, node: str, handle, what: str) -> int:
    return int(const_scalar(op, node, handle, what))


def band(op: IrOp, node: str, k) -> tuple[int, int]:
    """(lo, hi) from the Const k: one value (lo = hi) or two, lo <= hi, as TF reads it."""
    ks = const_value(op, node, k, "k")
    if ks.ndim > 1 or ks.size not in (1, 2):
        raise GraphError(f"{op.type} {node!r}: input 'k' must be a scalar or a vector of 1 or 2 values, got shape "
                         f"{list(ks.shape)}")
    lo, hi = int(ks.reshape(-1)[0]), int(ks.reshape(-1)[-1])
    if lo > hi:
        raise GraphError(f"{op.type} {node!r}: input 'k' is [{lo}, {hi}]; its lower diagonal must not be above the "
                         "upper one")
    return lo, hi


def _check_align(op: IrOp, node: str, attrs) -> None:
    if attrs["align"] not in ALIGNS:
        raise GraphError(f"{op.type} {node!r}: attribute 'align' is {attrs['align']!r}; TF accepts "
                         f"{', '.join(ALIGNS)}")


def _check_inside(op: IrOp, node: str, rows: int, cols: int, lo: int, hi: int) -> None:
    """TF's bound on k for a [rows, cols] matrix: each end inside the matrix, or 0 (fine for an empty matrix)."""
    for name, d in (("lower", lo), ("upper", hi)):
        if not (-rows < d < cols or d == 0):
            raise GraphError(f"{op.type} {node!r}: input 'k': the {name} diagonal {d} is out of bounds for a "
                             f"{rows}x{cols} matrix")


def max_diag_len(rows: int, cols: int, lo: int, hi: int) -> int:
    """The longest diagonal of the band [lo, hi] of a [rows, cols] matrix."""
    return min(rows + min(hi, 0), cols - max(lo, 0))


def _diag_part(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, k, padding = inputs
    _check_align(op, node, attrs)
    if len(x.shape) < 2 or padding.desc.num_elements != 1 or padding.dtype != x.dtype:
        raise GraphError(f"{op.type} {node!r}: x {x.dtype}{list(x.shape)} must be a (batch of) matrices and "
                         f"padding_value one value of its dtype, got {padding.dtype}{list(padding.shape)}")
    lo, hi = band(op, node, k)
    rows, cols = x.shape[-2:]
    _check_inside(op, node, rows, cols, lo, hi)
    shape = (*x.shape[:-2], *((hi - lo + 1,) if lo != hi else ()), max(max_diag_len(rows, cols, lo, hi), 0))
    return [TensorDesc("y", x.dtype, _bounded(op, node, "y", shape))]


register(IrOp("MatrixDiagPartV3", (IrInput("x", BASIC), IrInput("k", ("int32",)), IrInput("padding_value", BASIC)),
              (IrOutput("y", BASIC),), (IrAttr("align", "string", "RIGHT_LEFT"),), outputs_from="infer",
              infer=_diag_part, same_dtype=("x", "padding_value"),
              doc="y = the diagonals k (one, or the band [lo, hi] stacked from hi down) of each matrix of x, the "
                  "shorter ones aligned by `align` and padded with padding_value."))


def diag_rows_cols(op: IrOp, node: str, diag_shape, lo: int, hi: int, rows: int, cols: int) -> tuple[int, int]:
    """MatrixDiagV3's output matrix size: num_rows/num_cols, -1 inferred from the diagonals, checked as TF does."""
    count = hi - lo + 1
    if len(diag_shape) < (1 if lo == hi else 2) or (lo != hi and diag_shape[-2] != count):
        raise GraphError(f"{op.type} {node!r}: x of shape {list(diag_shape)} must hold {count} diagonal(s) of k "
                         f"[{lo}, {hi}] (a last axis, and before it one of {count} for a band)")
    length = diag_shape[-1]
    min_rows, min_cols = length - min(hi, 0), length + max(lo, 0)
    if rows == -1 and cols == -1:
        rows = cols = max(min_rows, min_cols)
    elif rows == -1:
        rows = min_rows
    elif cols == -1:
        cols = min_cols
    if rows < min_rows or cols < min_cols or not (rows == min_rows or cols == min_cols):
        raise GraphError(f"{op.type} {node!r}: num_rows {rows} and num_cols {cols} do not fit diagonals of length "
                         f"{length} for k [{lo}, {hi}] (TF requires rows >= {min_rows}, cols >= {min_cols}, one of "
                         "them equal)")
    return rows, cols


def _diag(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, k, num_rows, num_cols, padding = inputs
    _check_align(op, node, attrs)
    if padding.desc.num_elements != 1 or padding.dtype != x.dtype:
        raise GraphError(f"{op.type} {node!r}: padding_value must be one value of x's dtype {x.dtype}, got "
                         f"{padding.dtype}{list(padding.shape)}")
    lo, hi = band(op, node, k)
    rows, cols = (_scalar_int(op, node, h, n) for h, n in ((num_rows, "num_rows"), (num_cols, "num_cols")))
    for name, value in (("num_rows", rows), ("num_cols", cols)):
        if value < -1 or value > MAX_ELEMENTS:
            raise GraphError(f"{op.type} {node!r}: input {name!r} is {value}; expected -1 (inferred) or a size")
    rows, cols = diag_rows_cols(op, node, x.shape, lo, hi, rows, cols)
    batch = x.shape[:-1] if lo == hi else x.shape[:-2]
    return [TensorDesc("y", x.dtype, _bounded(op, node, "y", (*batch, rows, cols)))]


_WITH_BOOL = (*BASIC, "bool")
register(IrOp("MatrixDiagV3", (IrInput("x", _WITH_BOOL), IrInput("k", ("int32",)), IrInput("num_rows", ("int32",)),
                               IrInput("num_cols", ("int32",)), IrInput("padding_value", _WITH_BOOL)),
              (IrOutput("y", _WITH_BOOL),), (IrAttr("align", "string", "RIGHT_LEFT"),), outputs_from="infer",
              infer=_diag, same_dtype=("x", "padding_value"),
              doc="y = [num_rows, num_cols] matrices of padding_value with the diagonals k set from x (aligned as "
                  "MatrixDiagPartV3 reads them)."))


def _set_diag(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, diagonal, k = inputs
    _check_align(op, node, attrs)
    if len(x.shape) < 2:
        raise GraphError(f"{op.type} {node!r}: input must be a (batch of) matrices, got shape {list(x.shape)}")
    lo, hi = band(op, node, k)
    rows, cols = x.shape[-2:]
    _check_inside(op, node, rows, cols, lo, hi)
    want = (*x.shape[:-2], *((hi - lo + 1,) if lo != hi else ()), max(max_diag_len(rows, cols, lo, hi), 0))
    if tuple(diagonal.shape) != want:
        raise GraphError(f"{op.type} {node!r}: diagonal has shape {list(diagonal.shape)}; k [{lo}, {hi}] of input "
                         f"{list(x.shape)} needs {list(want)}")
    return [TensorDesc("output", x.dtype, x.shape)]


register(IrOp("MatrixSetDiagV3", (IrInput("input", BASIC), IrInput("diagonal", BASIC), IrInput("k", ("int32",))),
              (IrOutput("output", BASIC),), (IrAttr("align", "string", "RIGHT_LEFT"),), outputs_from="infer",
              infer=_set_diag, same_dtype=("input", "diagonal"),
              doc="output = input with the diagonals k replaced by `diagonal` (aligned as MatrixDiagPartV3's)."))


def _band_part(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, lower, upper = inputs
    if len(x.shape) < 2 or lower.desc.num_elements != 1 or upper.desc.num_elements != 1:
        raise GraphError(f"{op.type} {node!r}: x must be a (batch of) matrices and num_lower, num_upper one value "
                         f"each, got {list(x.shape)}, {list(lower.shape)}, {list(upper.shape)}")
    return [TensorDesc("y", x.dtype, x.shape)]


register(IrOp("MatrixBandPart", (IrInput("x", BAND_PART), IrInput("num_lower", ("int32", "int64")),
                                 IrInput("num_upper", ("int32", "int64"))), (IrOutput("y", BAND_PART),),
              outputs_from="infer", infer=_band_part, same_dtype=("num_lower", "num_upper"),
              doc="y = x where (num_lower < 0 or i - j <= num_lower) and (num_upper < 0 or j - i <= num_upper), "
                  "else 0 (i, j: row and column)."))


def top_k_axis(op: IrOp, node: str, x, attrs) -> int:
    rank = len(x.shape)
    if not -rank <= attrs["dim"] < rank:
        raise GraphError(f"{op.type} {node!r}: attribute 'dim' is {attrs['dim']}; x has rank {rank}")
    return attrs["dim"] % rank


def _top_k(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, k = inputs
    count = _scalar_int(op, node, k, "k")
    axis = top_k_axis(op, node, x, attrs)
    if not 0 <= count <= x.shape[axis]:
        raise GraphError(f"{op.type} {node!r}: input 'k' is {count}; x has {x.shape[axis]} values along axis {axis}")
    if not attrs["sorted"]:
        raise GraphError(f"{op.type} {node!r}: sorted=False is not supported (TF's CPU kernel sorts; the order "
                         "it leaves otherwise is unspecified)")
    shape = tuple(count if a == axis else d for a, d in enumerate(x.shape))
    return [TensorDesc("values", x.dtype, shape), TensorDesc("indices", as_dtype("int32"), shape)]


register(IrOp("TopKV2", (IrInput("x", REAL_NUMBERS), IrInput("k", ("int32",))),
              (IrOutput("values", REAL_NUMBERS), IrOutput("indices", ("int32",))),
              (IrAttr("sorted", "bool", True), IrAttr("dim", "int", -1), IrAttr("largest", "bool", True)),
              outputs_from="infer", infer=_top_k,
              doc="values, indices = the k largest (smallest) along `dim`, sorted, ties by lower index first."))


def _roll(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    shifts, dims = attrs["shifts"], attrs["dims"]
    rank = len(x.shape)
    if not shifts or (dims and len(dims) != len(shifts)) or (not dims and len(shifts) != 1):
        raise GraphError(f"{op.type} {node!r}: attributes 'shifts' {shifts} and 'dims' {dims} must pair up (or one "
                         "shift of the flattened x, with no dims)")
    if any(not -rank <= d < rank for d in dims):
        raise GraphError(f"{op.type} {node!r}: attribute 'dims' {dims} must name axes of rank {rank}")
    return [TensorDesc("y", x.dtype, x.shape)]


register(IrOp("Roll", (IrInput("x", ROLL),), (IrOutput("y", ROLL),),
              (IrAttr("shifts", "list_int", required=True), IrAttr("dims", "list_int", [])), outputs_from="infer",
              infer=_roll, doc="y = x rolled by shifts[i] along dims[i] (shifts on one axis add up; no dims: the "
                               "flattened x, reshaped back)."))
