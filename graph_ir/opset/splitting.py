"""The splitting ops' GE prototypes, the slicing family's ops that cut a tensor into many (CANN's REG_OPs, as
torch-npu's generated auto_generated_ge_raw_ops.py keeps them; third_party/cann/ge_reg_ops.txt copies them
verbatim): Split, SplitV, Unpack, and ConcatOffset (where each part of a concatenation starts, what a Concat's
gradient splits by). Inputs that decide the outputs' shapes (split_dim, size_splits) must be Consts; every dim is
checked against its input, naming the node and the field. Executors: graph_ir/executors/slicing.py; TF mappings:
graph_ir/lowering/ops/slicing.py."""

from __future__ import annotations

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import ALL_DTYPES, INDICES, IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import const_value
from graph_ir.opset.array import BASIC
from graph_ir.opset.slicing import axis_in, const_scalar

MAX_PARTS = 1 << 16  # the most outputs a Split, SplitV or Unpack may have: an empty dim splits into any count


def _parts(op: IrOp, node: str, count: int, what: str) -> int:
    if count > MAX_PARTS:
        raise GraphError(f"{op.type} {node!r}: {what} is {count}; graph_ir gives a node at most {MAX_PARTS} outputs")
    return count


def _split(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, count = inputs[1], _parts(op, node, attrs["num_split"], "num_split")
    axis = axis_in(op, node, const_scalar(op, node, inputs[0], "split_dim"), len(x.shape), "split_dim")
    if x.shape[axis] % count:
        raise GraphError(f"Split {node!r}: dim {axis} of x ({x.shape[axis]}) does not split into num_split {count} "
                         "equal parts")
    shape = tuple(d // count if k == axis else d for k, d in enumerate(x.shape))
    return [TensorDesc(f"y{k}", x.dtype, shape) for k in range(count)]


def split_sizes(op: IrOp, node: str, sizes: list[int], dim: int) -> list[int]:
    """SplitV's size_splits with its one -1 resolved; they must add up to `dim`."""
    known = [s for s in sizes if s != -1]
    if sizes.count(-1) > 1 or min(known, default=0) < 0 or sum(known) > dim or (-1 not in sizes and sum(known) != dim):
        raise GraphError(f"SplitV {node!r}: size_splits {sizes} must be sizes >= 0 (at most one -1) adding up to "
                         f"{dim}, the split dim of x")
    return [dim - sum(known) if s == -1 else s for s in sizes]


def _split_v(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    axis = axis_in(op, node, const_scalar(op, node, inputs[2], "split_dim"), len(x.shape), "split_dim")
    sizes = [int(s) for s in const_value(op, node, inputs[1], "size_splits").reshape(-1)]
    if len(sizes) != _parts(op, node, attrs["num_split"], "num_split"):
        raise GraphError(f"SplitV {node!r}: size_splits has {len(sizes)} entries, num_split is {attrs['num_split']}")
    shapes = [tuple(s if k == axis else d for k, d in enumerate(x.shape))
              for s in split_sizes(op, node, sizes, x.shape[axis])]
    return [TensorDesc(f"y{k}", x.dtype, s) for k, s in enumerate(shapes)]


def _unpack(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    axis = axis_in(op, node, attrs["axis"], len(x.shape))
    if x.shape[axis] != _parts(op, node, attrs["num"], "num"):
        raise GraphError(f"Unpack {node!r}: attribute 'num' is {attrs['num']}, but dim {axis} of x is "
                         f"{x.shape[axis]}")
    shape = x.shape[:axis] + x.shape[axis + 1:]
    return [TensorDesc(f"y{k}", x.dtype, shape) for k in range(attrs["num"])]


def _concat_offset(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    shapes = inputs[1:]
    if any(len(h.shape) != 1 or h.shape != shapes[0].shape for h in shapes):
        raise GraphError(f"ConcatOffset {node!r}: the shapes x must be 1-D of one length, got "
                         f"{[list(h.shape) for h in shapes]}")
    return [TensorDesc(f"y{k}", h.dtype, h.shape) for k, h in enumerate(shapes)]


def concat_offsets(op: IrOp, node: str, concat_dim: int, shapes: list[list[int]]) -> list[list[int]]:
    """Where each input starts in the concatenation of tensors of `shapes` along concat_dim (TF's ConcatOffset)."""
    rank = len(shapes[0])
    axis = axis_in(op, node, concat_dim, rank, "concat_dim")
    offsets, at = [], 0
    for k, shape in enumerate(shapes):
        if any(d != e for j, (d, e) in enumerate(zip(shape, shapes[0])) if j != axis):
            raise GraphError(f"ConcatOffset {node!r}: shape x{k} {shape} does not join x0 {shapes[0]} on axis {axis}")
        offsets.append([at if j == axis else 0 for j in range(rank)])
        at += shape[axis]
    return offsets


for _op in (
    IrOp("Split", (IrInput("split_dim", ("int32",)), IrInput("x", ALL_DTYPES)), (IrOutput("y", ALL_DTYPES, dynamic=True),),
         (IrAttr("num_split", "int", required=True, minimum=1),), outputs_from="infer", infer=_split,
         doc="y_k = the k-th of num_split equal parts of x along split_dim."),
    IrOp("SplitV", (IrInput("x", ALL_DTYPES), IrInput("size_splits", INDICES), IrInput("split_dim", ("int32",))),
         (IrOutput("y", ALL_DTYPES, dynamic=True),), (IrAttr("num_split", "int", required=True, minimum=1),),
         outputs_from="infer", infer=_split_v, doc="y_k = the k-th part of x along split_dim, size_splits[k] long."),
    IrOp("Unpack", (IrInput("x", BASIC),), (IrOutput("y", BASIC, dynamic=True),),
         (IrAttr("num", "int", required=True, minimum=0), IrAttr("axis", "int", 0)), outputs_from="infer",
         infer=_unpack, doc="y_k = x[..., k, ...] along `axis` (TF's Unpack / tf.unstack)."),
    IrOp("ConcatOffset", (IrInput("concat_dim", ("int32",)), IrInput("x", ("int32",), dynamic=True)),
         (IrOutput("y", ("int32",), dynamic=True),), (IrAttr("N", "int", required=True, minimum=2),),
         outputs_from="infer", infer=_concat_offset,
         doc="y_k = where the k-th of tensors of shapes x starts in their concatenation along concat_dim."),
):
    register(_op)
