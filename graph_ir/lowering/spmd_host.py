"""The host's cross-replica ops over one value of each local replica, for graph_ir/lowering/spmd.py: on rank k, a
collective of rank k's value (an Hcom op after lowering, graph_ir/lowering/ops/hcom.py).

- strategy.reduce's AddN of the replicas' values (cross_device_ops.py ReductionToOneDevice, the path of
  MirroredStrategy._reduce_to towards the host) -> an all-reduce "sum" of this rank's value (CollectiveReduceV2);
  MEAN's divide after it stays.
- A Pack of the replicas' values along axis 0, in replica order: tf.stack(strategy.experimental_local_results(v)), as
  Keras's fit reduces its logs (keras/src/backend/tensorflow/trainer.py reduce_per_replica, "mean" / "sum": reduce_mean
  or reduce_sum of the stacked local results) -> an all-gather (CollectiveGatherV2) of this rank's value with a new
  leading dim of 1: the ranks' values concatenated in rank order, which is the stack; the reduction after it stays.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from graph_ir.lowering.ops.hcom import SPMD_ATTR


def cross_replica_inputs(split: Any, node) -> list[str] | None:
    """The data inputs of a node that combines one value of each local replica (module docstring), else None.
    `split` is spmd._Split: its replica count and each tensor's replica (_value_replica)."""
    count = len(split.replicas.devices)
    data = [t for t in node.input if not t.startswith("^")]
    if node.op not in ("AddN", "Pack") or count < 2 or len(data) != count:
        return None
    owners = [split._value_replica(t) for t in data]
    if node.op == "Pack":  # a stack along axis 0 in replica order (another axis or order is no rank-order gather)
        return data if node.attr["axis"].i == 0 and owners == list(range(count)) else None
    return data if sorted(o for o in owners if o is not None) == list(range(count)) else None


def _const(node_type, name: str, value: np.ndarray):
    const = node_type(name=name, op="Const")
    const.attr["dtype"].type = tf.as_dtype(value.dtype).as_datatype_enum
    const.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value))
    return const


def collective_of(split: Any, node, mine: str) -> list[Any]:
    """Rank k's collective standing for `node` (cross_replica_inputs's), on rank k's input `mine`: [node, added]."""
    node_type = type(node)
    controls = [t for t in node.input if t.startswith("^")]
    size = _const(node_type, f"{node.name}/group_size", np.int32(split.replicas.world))
    added = [size]
    if node.op == "AddN":
        new = node_type(name=node.name, op="CollectiveReduceV2", device=node.device)
        new.attr["merge_op"].s, new.attr["final_op"].s = b"Add", b"Id"
        value = mine
    else:
        axis = _const(node_type, f"{node.name}/axis", np.int32(0))
        expand = node_type(name=f"{node.name}/expand", op="ExpandDims", device=node.device)
        expand.input.extend([mine, axis.name])
        expand.attr["T"].CopyFrom(node.attr["T"])
        expand.attr["Tdim"].type = tf.int32.as_datatype_enum
        added += [axis, expand]
        new = node_type(name=node.name, op="CollectiveGatherV2", device=node.device)
        value = expand.name
    new.attr["T"].CopyFrom(node.attr["T"])
    new.attr[SPMD_ATTR].i = split.replicas.world
    new.input.extend([value, size.name, *controls])
    return [new, *added]
