"""The collective family's TF -> GE mappings (prototypes: graph_ir/opset/hcom.py), for the one GE graph per rank that
graph_ir.from_distributed lowers a tf.distribute step to (graph_ir/lowering/spmd.py splits the step by replica first).

TF's collective ops (tensorflow/core/ops/collective_ops.cc) name their group and instance by key inputs and order
themselves by `ordering_token` resources; HCCL matches the ranks' collectives by their order in the graph, so the
split keeps the data input (and `group_size`, `shape`) and drops the rest, marking the node with the number of ranks
(SPMD_ATTR). Then:

- CollectiveReduceV2: merge_op Add / Mul / Min / Max -> HcomAllReduce reduction "sum" / "prod" / "min" / "max";
  final_op Div (tf.distribute's MEAN) -> a RealDiv by group_size after it (HCCL has no mean).
- CollectiveGatherV2: -> HcomAllGather(rank_size = group_size): the ranks' inputs concatenated along dim 0.
- CollectiveBcastSend: -> HcomBroadcast([x], root_rank) on every rank (the split's broadcast of a value one replica
  computes for all, such as Keras's iterations counter). TF's CollectiveBcastSendV2 and CollectiveBcastRecv(V2) are
  refused until a test covers them beside TF.

Ascend's TF adapter's own collective ops (hicann/tensorflow tf_adapter/ops/hccl/hccl_ops.cc; tf_plugin.hccl's on CPU:
tf_plugin/cc/ops/hccl_ops.cc), HcomAllReduce, HcomAllGather, HcomBroadcast and HcomReduceScatter, are GE's ops
already: each lowers 1:1 (ADAPTER_OPS), the same type, inputs and attributes, with graph_ir.from_tensorflow (the step
is one rank's already); the session checks `group`, `rank_size` and `root_rank` against its group at add_graph.

Group: `group_size` must be every rank (graph_ir runs HCCL's world group only, "hccl_world_group"). A collective
without the mark (a step lowered whole with graph_ir.from_tensorflow) is refused, naming from_distributed.
"""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.ops.common import maps_to, tf_attr
from graph_ir.opset.hcom import WORLD_GROUP

SPMD_ATTR = "_graph_ir_ranks"  # set by graph_ir/lowering/spmd.py: how many ranks run the graph
ROOT_ATTR = "_graph_ir_root_rank"  # set by graph_ir/lowering/spmd.py on broadcasts: the sending rank
REDUCTIONS = {"Add": "sum", "Mul": "prod", "Min": "min", "Max": "max"}  # collective_ops.cc's merge_op
REDUCES = ("CollectiveReduceV2",)
GATHERS = ("CollectiveGatherV2",)
SENDS = ("CollectiveBcastSend", "CollectiveBcastSendV2")
RECVS = ("CollectiveBcastRecv", "CollectiveBcastRecvV2")
COLLECTIVES = (*REDUCES, *GATHERS, *SENDS, *RECVS)
# TF collectives graph_ir does not map (refused by name; tensorflow/core/ops/collective_ops.cc).
UNMAPPED = ("CollectiveReduce", "CollectiveGather", "CollectiveReduceScatterV2", "CollectiveAllToAllV2",
            "CollectiveAllToAllV3", "CollectiveReduceV3", "NcclAllReduce")


def _hcom(ctx, ge_type: str, inputs, attrs: dict, suffix: str = ""):
    """An Hcom node for the TF node being lowered, never folded into Consts (ctx.add folds a node of known inputs;
    an Hcom node's value is the other ranks' too)."""
    return ctx.graph.add_node(ge_type, inputs, attrs, name=ctx._name(suffix), control_inputs=ctx.current_controls)


def _ranks(node) -> int:
    """The number of ranks the split marked the node with; a LoweringError for a step lowered whole."""
    ranks = tf_attr(node, SPMD_ATTR)
    if ranks is None:
        raise LoweringError(f"cannot lower TF op {node.op} (node {node.name!r}) with graph_ir.from_tensorflow: it is a "
                            "tf.distribute collective between replicas, and GE runs one graph per rank (SPMD): lower "
                            "the step with graph_ir.from_distributed(step, *args, strategy=strategy), which returns "
                            "one GE graph per rank with Hcom ops for the collectives")
    return int(ranks)


def _group_size(ctx, node, handle) -> int:
    value = ctx.value(handle)
    ranks = _ranks(node)
    if value is None or np.size(value) != 1:
        raise LoweringError(f"TF {node.op} {node.name!r}: its group_size is computed in the step; GE's Hcom ops take "
                            "the number of ranks as an attribute")
    size = int(np.asarray(value).reshape(()))
    if size != ranks:
        raise LoweringError(f"TF {node.op} {node.name!r}: a group of {size} of the {ranks} ranks; graph_ir runs the "
                            f"world group ({WORLD_GROUP!r}) only")
    return size


@maps_to("HcomAllReduce")
def _reduce(ctx, node, inputs):
    size = _group_size(ctx, node, inputs[1])
    merge, final = tf_attr(node, "merge_op"), tf_attr(node, "final_op")
    if merge not in REDUCTIONS or final not in ("Id", "Div"):
        raise LoweringError(f"TF {node.op} {node.name!r}: merge_op {merge!r} / final_op {final!r} (collective_ops.cc "
                            "allows Min, Max, Mul, Add and Id, Div)")
    reduced = _hcom(ctx, "HcomAllReduce", [inputs[0]], {"reduction": REDUCTIONS[merge], "group": WORLD_GROUP,
                                                      "fusion": 1, "fusion_id": -1},
                      suffix="hcom" if final == "Div" else "")
    if final == "Id":
        return reduced
    x = inputs[0]
    count = ctx.const(np.asarray(size, dtype=x.dtype.numpy), suffix="group_size_value")
    return ctx.add("RealDiv" if x.dtype.name.startswith("float") else "Div", [reduced.output(0), count])


UNIFORM_SUFFIX = "gathered_uniform"  # a gather of a value known when lowering (graph_ir/lowering/distributed.py)


@maps_to("HcomAllGather")
def _gather(ctx, node, inputs):
    size = _group_size(ctx, node, inputs[1])
    known = ctx.value(inputs[0])
    if known is not None:  # a shape (tf.distribute gathers the replicas' row counts): the same on every rank, which
        # from_distributed checks (the Const is named *UNIFORM_SUFFIX, its value compared across the ranks' graphs)
        return [ctx.const(np.concatenate([np.asarray(known)] * size, axis=0), suffix=UNIFORM_SUFFIX)]
    return _hcom(ctx, "HcomAllGather", [inputs[0]], {"rank_size": size, "group": WORLD_GROUP, "fusion": 0,
                                                  "fusion_id": -1})


def _root(node) -> int:
    root = tf_attr(node, ROOT_ATTR)
    if root is None:
        raise LoweringError(f"TF {node.op} {node.name!r}: graph_ir could not tell which rank sends this broadcast "
                            "(no CollectiveBcastSend of the same group and instance in the step)")
    return int(root)


@maps_to("HcomBroadcast")
def _send(ctx, node, inputs):
    _ranks(node)
    return _hcom(ctx, "HcomBroadcast", [inputs[0]], {"root_rank": _root(node), "group": WORLD_GROUP, "fusion": 0,
                                                  "fusion_id": -1})


ADAPTER_OPS = {"HcomAllReduce": ("reduction", "group", "fusion", "fusion_id"),
               "HcomAllGather": ("rank_size", "group", "fusion", "fusion_id"),
               "HcomBroadcast": ("root_rank", "group", "fusion", "fusion_id"),
               "HcomReduceScatter": ("reduction", "group", "rank_size", "fusion", "fusion_id")}


def _adapter(ge_type: str):
    """The 1:1 lowering of the adapter's TF op `ge_type`: its data inputs and its attributes, by name."""

    @maps_to(ge_type)
    def lower(ctx, node, inputs):
        node_ = _hcom(ctx, ge_type, list(inputs), {a: tf_attr(node, a) for a in ADAPTER_OPS[ge_type]})
        return [node_.output(k) for k in range(len(inputs))] if ge_type == "HcomBroadcast" else node_

    return lower


# TF's own broadcasts other than the sender V1 (what the split makes for a value one replica computes for all) have
# no test beside TF yet: refused by name until one covers them.
LOWERINGS = {**{op: _reduce for op in REDUCES}, **{op: _gather for op in GATHERS}, "CollectiveBcastSend": _send,
             **{op: _adapter(op) for op in ADAPTER_OPS}}
