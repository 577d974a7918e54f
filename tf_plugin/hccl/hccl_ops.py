"""npu_bridge.hccl.hccl_ops's collectives (hicann/tensorflow tf_adapter/python/npu_bridge/hccl/hccl_ops.py) on CPU:
the same functions, arguments and defaults, building the same TF ops (tf_plugin/cc/ops/hccl_ops.cc), whose kernels
run graph_ir/distributed's MPI engine in the world group ("hccl_world_group": every process mpiexec started).

On rank r of N, with x_k rank k's input:

- allreduce(x, reduction): y = x_0 op x_1 op ... op x_{N-1}, elementwise, the same on every rank; op is + (sum),
  * (prod), max or min. Floats reduce in rank order, left to right (float16 through float32, rounded once), so every
  rank gets the same bits run after run. HCCL has no mean: sum, then divide by N.
- allgather(x, rank_size): y = concat(x_0, ..., x_{N-1}) along dim 0; dim 0 is x's times rank_size (= N).
- broadcast([x^0, x^1, ...], root_rank): y^j = x^j of rank root_rank, for each tensor j of the list.
- reduce_scatter(x, reduction, rank_size): y = block r of (x_0 op ... op x_{N-1}) cut along dim 0 into rank_size
  equal blocks; x's dim 0 must be a multiple of rank_size.

The ops are stateful: inside a tf.function, TF's automatic control dependencies chain them in program order (each
collective waits for the previous one), so every rank issues them in the same order, as HCCL needs. Eager calls run
in program order anyway. The gradient of HcomAllReduce is registered as the adapter registers it:
allreduce(dy, "sum", fusion=0) (the adapter registers none for the other collectives).
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from graph_ir.opset.hcom import REDUCTIONS, WORLD_GROUP
from tf_plugin import _loader

_ops = _loader.load()


def _reduction(op: str, reduction: str) -> str:
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {', '.join(REDUCTIONS)} (HCCL has no 'mean': sum, then "
                         f"divide by the rank count), got {reduction!r}")
    return reduction


def allreduce(tensor: tf.Tensor, reduction: str, fusion: int = 1, fusion_id: int = -1,
              group: str = WORLD_GROUP) -> tf.Tensor:
    """y = the elementwise `reduction` ("sum", "prod", "max", "min") of every rank's `tensor`, on every rank.

    fusion: 0 not fused, 1 fused by the gradient split strategy (the default), 2 fused by equal fusion_id; GE's fusion
    pass changes no result, and here each collective runs on its own."""
    return _ops.hcom_all_reduce(input=tensor, reduction=_reduction("HcomAllReduce", reduction), group=group,
                                fusion=fusion, fusion_id=fusion_id)


@tf.RegisterGradient("HcomAllReduce")
def _allreduce_grad(op: tf.Operation, grad: tf.Tensor) -> tf.Tensor:
    """d(loss)/dx_r = sum over ranks k of d(loss_k)/dy: allreduce(dy, "sum", fusion=0), as the adapter's gradient."""
    return allreduce(grad, "sum", fusion=0, group=op.get_attr("group").decode())


def allgather(tensor: tf.Tensor, rank_size: int, group: str = WORLD_GROUP, fusion: int = 0,
              fusion_id: int = -1) -> tf.Tensor:
    """y = every rank's `tensor` concatenated along dim 0 in rank order; rank_size must be the number of ranks."""
    return _ops.hcom_all_gather(input=tensor, group=group, fusion=fusion, fusion_id=fusion_id, rank_size=rank_size)


def broadcast(tensor: Sequence[tf.Tensor], root_rank: int, fusion: int = 2, fusion_id: int = 0,
              group: str = WORLD_GROUP) -> list[tf.Tensor]:
    """y_j = rank root_rank's tensor[j], for each tensor of the list, on every rank (each rank feeds tensors of the
    same dtypes and shapes)."""
    return _ops.hcom_broadcast(input=list(tensor), fusion=fusion, fusion_id=fusion_id, group=group,
                               root_rank=root_rank)


def reduce_scatter(tensor: tf.Tensor, reduction: str, rank_size: int, group: str = WORLD_GROUP, fusion: int = 0,
                   fusion_id: int = -1) -> tf.Tensor:
    """y = block `rank` of the elementwise `reduction` of every rank's `tensor`, cut along dim 0 into rank_size
    equal blocks (dim 0 a multiple of rank_size)."""
    return _ops.hcom_reduce_scatter(input=tensor, reduction=_reduction("HcomReduceScatter", reduction), group=group,
                                    fusion=fusion, fusion_id=fusion_id, rank_size=rank_size)
