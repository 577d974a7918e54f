"""The collective (Hcom) family's GE prototypes, as CANN's op_proto/inc/hcom_ops.h declares them (in
third_party/cann/ge_reg_ops.txt): the ops through which GE has HCCL exchange tensors between the ranks of a
data-parallel job, one process per device, each running the same graph.

- HcomAllReduce: y = the elementwise `reduction` ("sum", "prod", "max", "min") of every rank's x; same shape.
- HcomAllGather: y = the ranks' x concatenated along dim 0 in rank order; dim 0 is x's times `rank_size`.
- HcomReduceScatter: the reduction of every rank's x, cut along dim 0 into `rank_size` equal blocks; rank r gets
  block r. x's dim 0 must be a multiple of `rank_size` (refused here otherwise).
- HcomReduce: the reduction of every rank's x on rank `root_rank`; the other ranks' y holds their own x unchanged
  (HCCL leaves their output buffer as given; graph_ir copies x there, so that y is always defined).
- HcomBroadcast: a list in, a list out: y_k = rank `root_rank`'s x_k, on every rank (every rank feeds x_k).

`group` names the ranks taking part; "hccl_world_group" (WORLD_GROUP) is all of them, the only group graph_ir
runs. `fusion` and `fusion_id` ask GE to fuse collectives into one (a compile pass, hcom_ops.h's doc comments): they
change no result, so graph_ir checks their values and runs each node on its own. Which rank a process is and how
many there are comes from the session's group at run time (graph_ir/distributed); `rank_size` must equal it.
Executors: graph_ir/distributed/executors.py.
"""

from __future__ import annotations

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import IrAttr, IrInput, IrOp, IrOutput, register

WORLD_GROUP = "hccl_world_group"  # HCCL's name for the group of every rank (hcom_ops.h's "@attention Constraints")
GROUP_NAME_MAX = 128  # "group is limited to 128 characters" (hcom_ops.h)
REDUCTIONS = ("sum", "prod", "max", "min")
# hcom_ops.h: AllReduce, Reduce and ReduceScatter take these five; AllGather and Broadcast eleven.
REDUCE_DTYPES = ("float32", "int32", "int8", "int16", "float16")
MOVE_DTYPES = (*REDUCE_DTYPES, "int64", "uint64", "uint8", "uint16", "uint32", "float64")
FUSIONS = (0, 1, 2)  # 0: not fused; 1: fused by the gradient split strategy; 2: fused by equal fusion_id
HCOM_OPS = ("HcomAllGather", "HcomAllReduce", "HcomBroadcast", "HcomReduce", "HcomReduceScatter")


def check_common(op: IrOp, node: str, attrs) -> None:
    """`group` a non-empty name of at most 128 characters, `reduction` one of REDUCTIONS, `fusion` one of FUSIONS."""
    group = attrs["group"]
    if not group or len(group) > GROUP_NAME_MAX:
        raise GraphError(f"{op.type} {node!r}: attribute 'group' must be a name of 1 to {GROUP_NAME_MAX} characters "
                         f"({WORLD_GROUP!r} for every rank), got {group!r:.140}")
    if "reduction" in attrs and attrs["reduction"] not in REDUCTIONS:
        raise GraphError(f"{op.type} {node!r}: attribute 'reduction' must be one of {', '.join(REDUCTIONS)} "
                         f"(HCCL has no 'mean': sum, then divide), got {attrs['reduction']!r:.80}")
    if attrs.get("fusion", 0) not in FUSIONS:
        raise GraphError(f"{op.type} {node!r}: attribute 'fusion' must be 0 (not fused), 1 (split strategy) or 2 "
                         f"(by fusion_id), got {attrs['fusion']}")


def _ranked(op: IrOp, node: str, x) -> tuple[int, ...]:
    if not x.shape:
        raise GraphError(f"{op.type} {node!r}: x must have rank >= 1 (the ranks' blocks lie along dim 0), got a "
                         "scalar")
    return tuple(x.shape)


def _same(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    check_common(op, node, attrs)
    return [TensorDesc("y", inputs[0].dtype, tuple(inputs[0].shape))]


def _all_gather(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    check_common(op, node, attrs)
    shape = _ranked(op, node, inputs[0])
    first = shape[0] * attrs["rank_size"] if shape[0] >= 0 else -1
    return [TensorDesc("y", inputs[0].dtype, (first, *shape[1:]))]


def _reduce_scatter(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    check_common(op, node, attrs)
    shape, ranks = _ranked(op, node, inputs[0]), attrs["rank_size"]
    if shape[0] >= 0 and shape[0] % ranks:
        raise GraphError(f"{op.type} {node!r}: x's dim 0 ({shape[0]}) must be a multiple of rank_size ({ranks}): "
                         "each rank gets an equal block of the reduction")
    return [TensorDesc("y", inputs[0].dtype, (shape[0] // ranks if shape[0] >= 0 else -1, *shape[1:]))]


def _broadcast(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    check_common(op, node, attrs)
    if not inputs:
        raise GraphError(f"{op.type} {node!r}: the list input 'x' holds no tensor")
    return [h.desc.renamed(f"y{k}") for k, h in enumerate(inputs)]


def _fusion(default: int) -> tuple[IrAttr, IrAttr]:
    return IrAttr("fusion", "int", default), IrAttr("fusion_id", "int", -1)


_GROUP = IrAttr("group", "string", required=True)
_REDUCTION = IrAttr("reduction", "string", required=True)
_RANK_SIZE = IrAttr("rank_size", "int", required=True, minimum=1)
_ROOT = IrAttr("root_rank", "int", required=True, minimum=0)

register(IrOp("HcomAllGather", (IrInput("x", MOVE_DTYPES),), (IrOutput("y", MOVE_DTYPES),),
              (_RANK_SIZE, _GROUP, *_fusion(0)), outputs_from="infer", infer=_all_gather,
              doc="y = every rank's x concatenated along dim 0 in rank order (dim 0 times rank_size)."))
register(IrOp("HcomAllReduce", (IrInput("x", REDUCE_DTYPES),), (IrOutput("y", REDUCE_DTYPES),),
              (_REDUCTION, _GROUP, *_fusion(1)), outputs_from="infer", infer=_same,
              doc="y = the elementwise reduction (sum, prod, max, min) of every rank's x, the same on every rank."))
register(IrOp("HcomBroadcast", (IrInput("x", MOVE_DTYPES, dynamic=True),), (IrOutput("y", MOVE_DTYPES, dynamic=True),),
              (_ROOT, _GROUP, *_fusion(0)), outputs_from="infer", infer=_broadcast,
              doc="y_k = rank root_rank's x_k on every rank (each rank feeds x_k of the same desc)."))
register(IrOp("HcomReduce", (IrInput("x", REDUCE_DTYPES),), (IrOutput("y", REDUCE_DTYPES),),
              (_ROOT, _REDUCTION, _GROUP, *_fusion(0)), outputs_from="infer", infer=_same,
              doc="y = the reduction of every rank's x on rank root_rank; the other ranks' y is their own x."))
register(IrOp("HcomReduceScatter", (IrInput("x", REDUCE_DTYPES),), (IrOutput("y", REDUCE_DTYPES),),
              (_REDUCTION, *_fusion(0), _GROUP, _RANK_SIZE), outputs_from="infer", infer=_reduce_scatter,
              doc="y = block `rank` of the reduction of every rank's x, cut along dim 0 into rank_size blocks."))
