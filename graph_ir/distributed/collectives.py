"""The Hcom collectives over MPI's non-blocking collectives, with bounded waits (graph_ir/distributed/waiting.py), on
arrays: `fn(group, what, arrays, attrs) -> outputs` (ON_ARRAYS). Two callers run them, so that there is one engine:
the GE executors (EXECUTORS: `fn(node, args) -> outputs`, as every executor of graph_ir/executors, on the running
session's group, graph_ir/distributed/runs.py; graph_ir/opset/hcom.py has their prototypes) and tf_plugin's CPU
kernels of the TF ops HcomAllReduce, HcomAllGather, HcomBroadcast and HcomReduceScatter (tf_plugin/hccl/engine.py).

How each reduces, so that every rank ends with the same bits, run after run:
- Integers (int8, int16, int32): MPI_Iallreduce / MPI_Ireduce_scatter_block / MPI_Ireduce with MPI_SUM, MPI_PROD,
  MPI_MAX, MPI_MIN. Integer sums and products wrap (two's complement) and are exact in any order.
- float32 sum and product on one or two ranks: MPI_Iallreduce, which gives the rank-order result bitwise there
  (x_0 op x_1 and x_1 op x_0 are the same bits: IEEE addition and multiplication commute).
- Other floats (float32, float16): as HCCL's ring does, in two steps where each element is reduced by one rank only:
  MPI_Ialltoall hands rank r block r of every rank's buffer (padded to equal blocks), rank r reduces its blocks in
  rank order (x_0 op x_1 op ... op x_{N-1}, left to right), and MPI_Iallgather gives every rank every reduced
  block. float32 reduces in float32, so a sum is exactly float32's left-to-right sum of the ranks' values.
  float16 (which MPI has no type for) reduces in float32 and rounds to float16 once at the end: HCCL's device adds in
  float16 along its ring, an order this process cannot reproduce anyway; the wider sum is the more accurate one and
  is the same on every rank. max and min propagate NaN (NumPy's maximum and minimum).
- HcomAllGather, HcomBroadcast: bytes moved as they are (any dtype of the REG_OP): MPI_Iallgather, one MPI_Ibcast
  of the list's tensors packed together.
"""

from __future__ import annotations

import numpy as np

from graph_ir.distributed.group import Group, HcomError, mpi
from graph_ir.distributed.runs import current
from graph_ir.distributed.waiting import bounded, check_aborts
from graph_ir.ir.nodes import Node

_NUMPY_REDUCE = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


def _mpi_op(reduction: str):
    MPI = mpi()
    return {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}[reduction]


def _what(node: Node) -> str:
    return f"{node.type} {node.name!r}"


def check_group(group: Group, what: str, attrs: dict) -> None:
    """The checks every collective makes first: the group not broken, `rank_size` its size, `root_rank` one of its
    ranks (HcomError naming this rank and `what`, the op and its node)."""
    check_aborts(group, what)
    if "rank_size" in attrs and attrs["rank_size"] != group.size:
        raise HcomError(f"rank {group.rank}: {what}: attribute 'rank_size' is {attrs['rank_size']}, but "
                        f"group {group.name!r} has {group.size} ranks")
    if "root_rank" in attrs and not 0 <= attrs["root_rank"] < group.size:
        raise HcomError(f"rank {group.rank}: {what}: root_rank {attrs['root_rank']} is not a rank of "
                        f"group {group.name!r} ({group.size} ranks)")


def _bytes(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def _reduce_blocks(blocks: np.ndarray, dtype: np.dtype, reduction: str) -> np.ndarray:
    """blocks[N, m] reduced over the ranks in rank order, left to right; float16 in float32, rounded once."""
    wide = blocks.astype(np.float32) if dtype == np.float16 else blocks
    out = wide[0].copy()
    fn = _NUMPY_REDUCE[reduction]
    with np.errstate(all="ignore"):
        for row in wide[1:]:
            fn(out, row, out=out)
    return out.astype(dtype, copy=False)


def _my_block(group: Group, x: np.ndarray, reduction: str, what: str) -> tuple[np.ndarray, int]:
    """This rank's block of the rank-order float reduction of every rank's x (flat, padded to N equal blocks), and
    the block length."""
    MPI = mpi()
    n = group.size
    block = -(-x.size // n)
    if x.size == block * n:
        flat = np.ascontiguousarray(x).reshape(-1)  # equal blocks already: sent as it is
    else:
        flat = np.zeros(block * n, x.dtype)
        flat[:x.size] = x.reshape(-1)
    gathered = np.empty((n, block), x.dtype)
    bounded(group, group.comm.Ialltoall([_bytes(flat), MPI.BYTE], [_bytes(gathered), MPI.BYTE]), what)
    return _reduce_blocks(gathered, x.dtype, reduction), block


def _commutes_exactly(group: Group, dtype: np.dtype, reduction: str) -> bool:
    """True when MPI's own allreduce gives the rank-order result bitwise: on two ranks a float32 sum or product is
    x_0 op x_1 on one rank and x_1 op x_0 on the other, the same bits because IEEE addition and multiplication
    commute. (max and min stay ours: MPI's do not propagate NaN. Two NaNs of different payloads may keep either.)"""
    return group.size <= 2 and dtype == np.float32 and reduction in ("sum", "prod")


# The collectives on arrays: fn(group, what, arrays, attrs) -> outputs, `what` naming the op and its node in errors.
# The GE executors (below) and tf_plugin's TF kernels (tf_plugin/hccl/engine.py) both run these.


def all_reduce_arrays(group: Group, what: str, args: list[np.ndarray], attrs: dict) -> list[np.ndarray]:
    """HcomAllReduce: the reduction of every rank's x, on every rank (see the module docstring)."""
    MPI = mpi()
    x, reduction = args[0], attrs["reduction"]
    if x.dtype.kind != "f" or _commutes_exactly(group, x.dtype, reduction):
        y = np.empty_like(x, order="C")
        bounded(group, group.comm.Iallreduce(np.ascontiguousarray(x), y, op=_mpi_op(reduction)), what)
        return [y]
    mine, block = _my_block(group, x, reduction, what)
    everything = np.empty(block * group.size, x.dtype)
    bounded(group, group.comm.Iallgather([_bytes(mine), MPI.BYTE], [_bytes(everything), MPI.BYTE]), what)
    return [everything[:x.size].reshape(x.shape)]


def reduce_scatter_arrays(group: Group, what: str, args: list[np.ndarray], attrs: dict) -> list[np.ndarray]:
    """HcomReduceScatter: block `rank` (along dim 0) of the reduction of every rank's x (dim 0 a multiple of N)."""
    x, reduction = args[0], attrs["reduction"]
    shape = (x.shape[0] // group.size, *x.shape[1:])
    if x.dtype.kind != "f":
        y = np.empty(shape, x.dtype)
        bounded(group, group.comm.Ireduce_scatter_block(np.ascontiguousarray(x), y, op=_mpi_op(reduction)), what)
        return [y]
    mine, _ = _my_block(group, x, reduction, what)  # dim 0 divides by N: the blocks are the row blocks, unpadded
    return [mine.reshape(shape)]


def reduce_arrays(group: Group, what: str, args: list[np.ndarray], attrs: dict) -> list[np.ndarray]:
    """HcomReduce: the reduction on rank root_rank; the other ranks' y is their own x."""
    MPI = mpi()
    x, reduction, root = np.ascontiguousarray(args[0]), attrs["reduction"], attrs["root_rank"]
    here = group.rank == root
    if x.dtype.kind != "f":
        y = np.empty_like(x) if here else None
        bounded(group, group.comm.Ireduce(x, y, op=_mpi_op(reduction), root=root), what)
        return [y if here else x.copy()]
    gathered = np.empty((group.size, x.size), x.dtype) if here else None
    bounded(group, group.comm.Igather([_bytes(x), MPI.BYTE], None if gathered is None else
                                      [_bytes(gathered), MPI.BYTE], root=root), what)
    return [_reduce_blocks(gathered, x.dtype, reduction).reshape(x.shape) if here else x.copy()]


def all_gather_arrays(group: Group, what: str, args: list[np.ndarray], attrs: dict) -> list[np.ndarray]:
    """HcomAllGather: every rank's x, concatenated along dim 0 in rank order."""
    MPI = mpi()
    x = args[0]
    y = np.empty((x.shape[0] * group.size, *x.shape[1:]), x.dtype)
    bounded(group, group.comm.Iallgather([_bytes(x), MPI.BYTE], [_bytes(y), MPI.BYTE]), what)
    return [y]


def broadcast_arrays(group: Group, what: str, args: list[np.ndarray], attrs: dict) -> list[np.ndarray]:
    """HcomBroadcast: y_k = rank root_rank's x_k, every tensor of the list in one MPI_Ibcast."""
    MPI = mpi()
    sizes = [a.nbytes for a in args]
    packed = np.concatenate([_bytes(a) for a in args]) if args else np.empty(0, np.uint8)
    bounded(group, group.comm.Ibcast([packed, MPI.BYTE], root=attrs["root_rank"]), what)
    outputs, offset = [], 0
    for a, size in zip(args, sizes):
        part = packed[offset:offset + size]
        part = part if offset % a.dtype.itemsize == 0 else part.copy()  # aligned for the dtype
        outputs.append(part.view(a.dtype).reshape(a.shape))
        offset += size
    return outputs


ON_ARRAYS = {"HcomAllReduce": all_reduce_arrays, "HcomReduceScatter": reduce_scatter_arrays,
             "HcomReduce": reduce_arrays, "HcomAllGather": all_gather_arrays, "HcomBroadcast": broadcast_arrays}


def _executor(op_type: str):
    """The GE executor of `op_type`: the running session's group (after the checks), then the array function."""
    run = ON_ARRAYS[op_type]

    def execute(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        group, what = current(node), _what(node)
        check_group(group, what, node.attrs)
        return run(group, what, args, node.attrs)

    execute.__name__ = execute.__qualname__ = f"execute_{op_type}"
    execute.__doc__ = run.__doc__
    return execute


def _float_workspace(node: Node) -> int:
    """A float reduction's blocks from every rank (x's bytes, padded), beside its input and output."""
    x = node.inputs[0].desc
    return 2 * x.nbytes if x.dtype.name.startswith("float") else 0


# Working memory beyond inputs and outputs (graph_ir/executors WORKSPACE): HcomReduce's root gathers N copies of x,
# N unknown when the graph is planned; it is not listed.
WORKSPACE = {"HcomAllReduce": _float_workspace, "HcomReduceScatter": _float_workspace}
EXECUTORS = {op_type: _executor(op_type) for op_type in ON_ARRAYS}
