"""The slicing family's GE prototypes (CANN's REG_OPs, as torch-npu's generated auto_generated_ge_raw_ops.py keeps them;
third_party/cann/ge_reg_ops.txt copies them verbatim): padding (Pad, PadV2, MirrorPad, MirrorPadGrad), cutting
(Slice, StridedSliceGrad, StridedSliceAssign; Split, SplitV, Unpack and ConcatOffset are graph_ir/opset/splitting.py's), indexing (GatherNd, ScatterNd, TensorScatterUpdate,
InvertPermutation), ReverseV2 and Cumsum. Inputs that decide an output's shape (paddings, sizes, axes) must be
Consts; every dim is checked against its input, naming the node and the field (StridedSliceGrad's begin, end and
strides may be computed: its output's shape is its Const `shape`, and dy's shape is checked at run time; so may
StridedSliceAssign's, which writes its Variable in place; Pad's and PadV2's paddings may be computed where each
row's sum is a constant, graph_ir/opset/linear_forms.py). Executors:
graph_ir/executors/slicing.py; TF mappings: graph_ir/lowering/ops/slicing.py."""

from __future__ import annotations

import math

import numpy as np

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import COMPLEX, INDICES, IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import check_shape, const_dims, const_value, known_or_none
from graph_ir.opset.array import BASIC, WITH_BOOL, strided_slice_index
from graph_ir.opset.linear_forms import difference, linear, negated

# CANN's explicit lists, as far as graph_ir holds their dtypes (no bfloat16, uint32 or uint64 there).
MIRROR = ("int8", "uint8", "int16", "uint16", "int32", "int64", "float16", "float32", "float64", "bool")
REVERSE = MIRROR


def axis_in(op: IrOp, node: str, axis: int, rank: int, what: str = "axis") -> int:
    """`axis` in [-rank, rank), as a non-negative axis."""
    if not -rank <= axis < rank:
        raise GraphError(f"{op.type} {node!r}: {what} {axis} is out of range for rank {rank} (expected [-{rank}, "
                         f"{rank}))")
    return axis % rank


def const_scalar(op: IrOp, node: str, handle, what: str) -> int:
    value = const_value(op, node, handle, what)
    if value.size != 1:
        raise GraphError(f"{op.type} {node!r}: input {what!r} must hold one value, got shape {list(value.shape)}")
    return int(value.reshape(-1)[0])


def const_pairs(op: IrOp, node: str, handle, rows: int, what: str) -> list[tuple[int, int]]:
    """A Const [rows, 2] of (before, after) amounts: Pad's paddings, BatchToSpaceND's crops."""
    value = const_value(op, node, handle, what)
    if value.shape != (rows, 2):
        raise GraphError(f"{op.type} {node!r}: input {what!r} must have shape [{rows}, 2], got {list(value.shape)}")
    return [(int(a), int(b)) for a, b in value.reshape(rows, 2)]


def mirror_offset(op: IrOp, node: str, mode: str) -> int:
    """1 for REFLECT (the edge is not repeated), 0 for SYMMETRIC (it is), as TF's mirror_pad_op.h counts."""
    if mode not in ("REFLECT", "SYMMETRIC"):
        raise GraphError(f"{op.type} {node!r}: attribute 'mode' must be 'REFLECT' or 'SYMMETRIC', got {mode!r}")
    return int(mode == "REFLECT")


def _computed_pads(op: IrOp, node: str, x, paddings) -> list[tuple[int, int]]:
    """Pad's paddings computed in the step (TF's SliceGrad at a computed begin): each row's before + after must be
    a constant of the graph (graph_ir/opset/linear_forms.py), so that y's shape is static: (0, total) per dim."""
    forms = linear(paddings, probed=True)  # y's shape holds at each probe size (graph_ir/dynamic)
    if op.type == "MirrorPad" or tuple(paddings.shape) != (len(x.shape), 2) or len(forms) != 2 * len(x.shape):
        raise GraphError(f"{op.type} {node!r}: its paddings are computed in the step; graph_ir pads at computed "
                         f"positions only with Pad and PadV2 and paddings of shape [{len(x.shape)}, 2], got "
                         f"{list(paddings.shape)}")
    totals = [difference(forms[2 * k], negated(forms[2 * k + 1])) for k in range(len(x.shape))]
    if None in totals:
        k = totals.index(None)
        raise GraphError(f"{op.type} {node!r}: its paddings are computed in the step and the size of dim {k} of y "
                         "(before + after) is not a constant: it would depend on run-time values (GE graphs here "
                         "have static shapes)")
    return [(0, t) for t in totals]


def _pad(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    pads = _computed_pads(op, node, x, inputs[1]) if known_or_none(inputs[1]) is None else \
        const_pairs(op, node, inputs[1], len(x.shape), "paddings")
    if any(min(p) < 0 for p in pads):
        raise GraphError(f"{op.type} {node!r}: paddings must be >= 0 (as TF requires), got {pads}")
    if op.type == "MirrorPad":
        offset = mirror_offset(op, node, attrs["mode"])
        for k, (d, (before, after)) in enumerate(zip(x.shape, pads)):
            if max(before, after) > d - offset:
                raise GraphError(f"MirrorPad {node!r}: paddings[{k}] = {[before, after]} must be <= {d - offset} "
                                 f"in {attrs['mode']} mode (dim {k} of x is {d})")
    shape = [d + a + b for d, (a, b) in zip(x.shape, pads)]
    return [TensorDesc("y", x.dtype, check_shape(node, "y", shape))]


def _mirror_pad_grad(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    pads = const_pairs(op, node, inputs[1], len(x.shape), "paddings")
    offset = mirror_offset(op, node, attrs["mode"])
    shape = [d - a - b for d, (a, b) in zip(x.shape, pads)]
    for k, (d, (before, after)) in enumerate(zip(shape, pads)):
        if min(before, after) < 0 or max(before, after) > d - offset:
            raise GraphError(f"MirrorPadGrad {node!r}: paddings[{k}] = {[before, after]} must be >= 0 and <= "
                             f"{d - offset} for an output dim {k} of {d} ({attrs['mode']} mode, x dim {x.shape[k]})")
    return [TensorDesc("y", x.dtype, check_shape(node, "y", shape))]


def slice_sizes(op: IrOp, node: str, x_shape, begin: list[int] | None, size: list[int]) -> list[int]:
    """Slice's sizes with -1 ("to the end") resolved, checked against x's shape (begin None: known at run time)."""
    if len(size) != len(x_shape) or (begin is not None and len(begin) != len(x_shape)):
        raise GraphError(f"Slice {node!r}: offsets and size must have one entry per dim of x {list(x_shape)}, got "
                         f"{begin} and {size}")
    out = []
    for k, (d, s) in enumerate(zip(x_shape, size)):
        b = 0 if begin is None else begin[k]
        if s == -1 and begin is not None:
            s = d - b
        if not (0 <= b <= d and 0 <= s and b + s <= d):
            raise GraphError(f"Slice {node!r}: offsets[{k}] = {b} and size[{k}] = {size[k]} do not fit dim {k} of "
                             f"x, which is {d}")
        out.append(s)
    return out


def _slice(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    size = const_dims(op, node, inputs[2], "size")
    # The offsets may be computed in the step when no size is -1: the shape does not depend on them then.
    begin = None if -1 not in size and inputs[1].node.type != "Const" else const_dims(op, node, inputs[1], "offsets")
    return [TensorDesc("y", x.dtype, tuple(slice_sizes(op, node, x.shape, begin, size)))]


def _strided_slice_grad(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    shape = check_shape(node, "shape", const_dims(op, node, inputs[0], "shape"))
    if any(h.node.type != "Const" for h in inputs[1:4]):  # computed in the step: dy's shape is checked at run time
        if any(len(h.shape) != 1 or h.shape != inputs[1].shape for h in inputs[1:4]):
            raise GraphError(f"StridedSliceGrad {node!r}: begin, end and strides must be 1-D of one length, got "
                             f"shapes {[list(h.shape) for h in inputs[1:4]]}")
        return [TensorDesc("output", inputs[4].dtype, shape)]
    values = [const_value(op, node, h, name) for h, name in zip(inputs[1:4], ("begin", "end", "strides"))]
    index = strided_slice_index(op, node, len(shape), *values, attrs)
    try:
        sliced = np.broadcast_to(np.zeros((), np.int8), shape)[index].shape  # a view: no memory
    except IndexError as e:
        raise GraphError(f"StridedSliceGrad {node!r}: {e} (shape is {list(shape)})") from None
    if tuple(inputs[4].shape) != sliced:
        raise GraphError(f"StridedSliceGrad {node!r}: dy has shape {list(inputs[4].shape)}, but the slice of "
                         f"{list(shape)} has shape {list(sliced)}")
    return [TensorDesc("output", inputs[4].dtype, shape)]


def _strided_slice_assign(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    var, value = inputs[0], inputs[4]
    if value.dtype != var.dtype:
        raise GraphError(f"StridedSliceAssign {node!r}: input_value is {value.dtype}, var is {var.dtype}")
    if any(len(h.shape) != 1 or h.shape != inputs[1].shape for h in inputs[1:4]):
        raise GraphError(f"StridedSliceAssign {node!r}: begin, end and strides must be 1-D of one length, got "
                         f"shapes {[list(h.shape) for h in inputs[1:4]]}")
    values = [known_or_none(h) for h in inputs[1:4]]
    if all(v is not None for v in values):  # known: TF's kernel's check now (computed: at run time)
        index = strided_slice_index(op, node, len(var.shape), *values, attrs)
        try:
            sliced = np.broadcast_to(np.zeros((), np.int8), var.shape)[index].shape  # a view: no memory
        except IndexError as e:
            raise GraphError(f"StridedSliceAssign {node!r}: {e} (var's shape is {list(var.shape)})") from None
        if math.prod(sliced) and tuple(value.shape) != sliced:
            raise GraphError(f"StridedSliceAssign {node!r}: input_value has shape {list(value.shape)}, but the slice "
                             f"of var {list(var.shape)} has shape {list(sliced)}")
    return [var.desc.renamed("var")]


def _index_depth(op: IrOp, node: str, indices, rank: int) -> int:
    """The last dim of `indices`: how many leading dims of the indexed tensor each index tuple picks."""
    if not indices.shape or indices.shape[-1] > rank:
        raise GraphError(f"{op.type} {node!r}: indices of shape {list(indices.shape)} must have rank >= 1 and a "
                         f"last dim <= {rank}, the rank they index")
    return indices.shape[-1]


def _gather_nd(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, indices = inputs
    if attrs["negative_index_support"]:
        raise GraphError(f"GatherNd {node!r}: graph_ir supports negative_index_support false (TF's rule), got true")
    depth = _index_depth(op, node, indices, len(x.shape))
    return [TensorDesc("y", x.dtype, (*indices.shape[:-1], *x.shape[depth:]))]


def _check_updates(op: IrOp, node: str, indices, updates, shape, what: str) -> None:
    depth = _index_depth(op, node, indices, len(shape))
    want = (*indices.shape[:-1], *shape[depth:])
    if tuple(updates.shape) != want:
        raise GraphError(f"{op.type} {node!r}: {what} has shape {list(updates.shape)}, expected {list(want)} (indices "
                         f"{list(indices.shape)} into shape {list(shape)})")


def _scatter_nd(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    indices, updates = inputs[0], inputs[1]
    shape = check_shape(node, "shape", const_dims(op, node, inputs[2], "shape"))
    _check_updates(op, node, indices, updates, shape, "x")
    return [TensorDesc("y", updates.dtype, shape)]


def tensor_scatter(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    """The output of TensorScatterUpdate and its kin: x's desc, after the updates are checked against the indices."""
    x, indices, updates = inputs
    _check_updates(op, node, indices, updates, x.shape, "updates")
    return [TensorDesc(op.outputs[0].name, x.dtype, x.shape)]


def _invert_permutation(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    if len(inputs[0].shape) != 1:
        raise GraphError(f"InvertPermutation {node!r}: x must be 1-D, got shape {list(inputs[0].shape)}")
    return [inputs[0].desc.renamed("y")]


def reverse_axes(op: IrOp, node: str, axes, rank: int) -> list[int]:
    """ReverseV2's axes, each in range and named once (TF refuses repeats)."""
    out = [axis_in(op, node, int(a), rank) for a in np.asarray(axes).reshape(-1)]
    if len(set(out)) != len(out):
        raise GraphError(f"ReverseV2 {node!r}: axis {np.asarray(axes).reshape(-1).tolist()} names an axis twice")
    return out


def _reverse(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    if len(inputs[1].shape) != 1:
        raise GraphError(f"ReverseV2 {node!r}: axis must be 1-D, got shape {list(inputs[1].shape)}")
    reverse_axes(op, node, const_value(op, node, inputs[1], "axis"), len(x.shape))
    return [x.desc.renamed("y")]


def _cumsum(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    axis_in(op, node, const_scalar(op, node, inputs[1], "axis"), len(x.shape))
    return [x.desc.renamed("y")]


_MASKS = tuple(IrAttr(f"{m}_mask", "int", 0) for m in ("begin", "end", "ellipsis", "new_axis", "shrink_axis"))
_MODE = IrAttr("mode", "string", required=True)
for _op in (
    # complex64: tf.signal.irfft pads a short half-spectrum with Pad (CANN's Pad declares BasicType, complex among it)
    IrOp("Pad", (IrInput("x", (*BASIC, *COMPLEX)), IrInput("paddings", INDICES)), (IrOutput("y", (*BASIC, *COMPLEX)),),
         outputs_from="infer",
         infer=_pad, doc="y = x with paddings[k] = (before, after) zeros around dim k."),
    IrOp("PadV2", (IrInput("x", BASIC), IrInput("paddings", INDICES), IrInput("constant_values", BASIC, scalar=True)),
         (IrOutput("y", BASIC),), outputs_from="infer", infer=_pad, same_dtype=("x", "constant_values"),
         doc="y = x with paddings[k] = (before, after) copies of constant_values around dim k."),
    IrOp("MirrorPad", (IrInput("x", MIRROR), IrInput("paddings", INDICES)), (IrOutput("y", MIRROR),), (_MODE,),
         outputs_from="infer", infer=_pad,
         doc="y = x with its edges mirrored: REFLECT without the edge element (pad <= dim - 1), SYMMETRIC with it."),
    IrOp("MirrorPadGrad", (IrInput("x", MIRROR[:-1]), IrInput("paddings", INDICES)), (IrOutput("y", MIRROR[:-1]),),
         (_MODE,), outputs_from="infer", infer=_mirror_pad_grad,
         doc="y = the gradient of MirrorPad: x's mirrored margins folded back onto its interior, dim by dim."),
    IrOp("Slice", (IrInput("x", BASIC), IrInput("offsets", INDICES), IrInput("size", INDICES)),
         (IrOutput("y", BASIC),), outputs_from="infer", infer=_slice, same_dtype=("offsets", "size"),
         doc="y = x[offsets : offsets + size] (a size of -1: to the end of the dim)."),
    IrOp("StridedSliceGrad", (*(IrInput(n, INDICES) for n in ("shape", "begin", "end", "strides")),
                              IrInput("dy", BASIC)), (IrOutput("output", BASIC),), _MASKS, outputs_from="infer",
         infer=_strided_slice_grad, same_dtype=("shape", "begin", "end", "strides"),
         doc="output = zeros of `shape` with dy written where StridedSlice read (a Const shape; begin, end and "
             "strides may be computed, dy's shape then checked at run time)."),
    IrOp("StridedSliceAssign", (IrInput("var", BASIC), *(IrInput(n, INDICES) for n in ("begin", "end", "strides")),
                                IrInput("input_value", BASIC)), (IrOutput("var", BASIC),), _MASKS,
         outputs_from="infer", infer=_strided_slice_assign, same_dtype=("begin", "end", "strides"),
         doc="var[begin:end:strides] = input_value, in place, as TF's StridedSliceAssign (begin, end and strides may "
             "be computed: a slice that is not empty must have input_value's shape, checked at run time)."),
    IrOp("InvertPermutation", (IrInput("x", INDICES),), (IrOutput("y", INDICES),), outputs_from="infer",
         infer=_invert_permutation, doc="y[x[i]] = i (x must be a permutation of 0..n-1)."),
    IrOp("GatherNd", (IrInput("x", BASIC), IrInput("indices", INDICES)), (IrOutput("y", BASIC),),
         (IrAttr("negative_index_support", "bool", False),), outputs_from="infer", infer=_gather_nd,
         doc="y[i...] = x[indices[i..., :]] (an index out of range is an error, as on TF's CPU)."),
    IrOp("ScatterNd", (IrInput("indices", INDICES), IrInput("x", BASIC), IrInput("shape", INDICES)),
         (IrOutput("y", BASIC),), outputs_from="infer", infer=_scatter_nd,
         doc="y = zeros of `shape` plus each x slice added at its index (repeats add up, in index order)."),
    IrOp("TensorScatterUpdate", (IrInput("x", WITH_BOOL), IrInput("indices", INDICES), IrInput("updates", WITH_BOOL)),
         (IrOutput("y", WITH_BOOL),), outputs_from="infer", infer=tensor_scatter, same_dtype=("x", "updates"),
         doc="y = x with the slices at `indices` replaced by updates (a repeated index: the last update wins)."),
    IrOp("ReverseV2", (IrInput("x", REVERSE), IrInput("axis", INDICES)), (IrOutput("y", REVERSE),),
         outputs_from="infer", infer=_reverse, doc="y = x reversed along each Const `axis`."),
    IrOp("Cumsum", (IrInput("x", BASIC), IrInput("axis", INDICES)), (IrOutput("y", BASIC),),
         (IrAttr("exclusive", "bool", False), IrAttr("reverse", "bool", False)), outputs_from="infer", infer=_cumsum,
         doc="y = the running sum of x along the Const `axis` (exclusive: the sum before each element; reverse: "
             "from the end)."),
):
    register(_op)
