"""A cross-replica tf.cond split by rank, for graph_ir/lowering/spmd.py: the cond Keras's LossScaleOptimizer builds in
merge_call under MirroredStrategy (keras/src/optimizers/loss_scale_optimizer.py, _tf_apply). It decides, for every
replica at once, on replica 0's finite check, and its branches hold every replica's update (call_for_each_replica).

On rank k, each branch keeps replica k's work (and the work of no replica), and the predicate becomes rank k's own
check all-reduced with "min" over the ranks: the step is skipped on every rank when any rank's gradients are not
finite, as Ascend's NPULossScaleOptimizer(is_distributed=True) does by all-reducing its overflow flag
(npu_bridge/estimator/npu/npu_loss_scale_optimizer.py). Where every replica's gradients are finite (or the
gradients were all-reduced first, as the check's comment in Keras assumes), that is TF's decision too."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import tensorflow as tf

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.capture import parse_tensor
from graph_ir.lowering.ops.hcom import ROOT_ATTR, SPMD_ATTR
from graph_ir.lowering.spmd_functions import _drop_arguments, _unused, function_devices, unique_controls

CONDS = ("If", "StatelessIf")


def is_cross_replica(split, node) -> bool:
    """Whether `node` is an If whose functions run the work of several replicas."""
    if node.op not in CONDS:
        return False
    owners = {split.replicas.of(d) for d in function_devices(node, split.library)} - {None}
    return len(owners) > 1


def _function_input(tensor: str) -> str:
    return tensor.lstrip("^").split(":")[0]


def _split_function(split, function, owners: dict[str, int | None], where: str) -> Any:
    """Rank k's copy of a branch: its nodes of replica k or of none (a node without a device takes the replica of
    what it reads); its return values dropped (the cond's results are read by nothing)."""
    replica: dict[str, int | None] = dict(owners)
    for node in function.node_def:
        replica[node.name] = split.replicas.of(node.device) if node.device else None
    for _ in range(4):  # a node without a device: the replica of an input that has one
        for node in function.node_def:
            if not node.device:
                found = {replica.get(_function_input(t)) for t in node.input if not t.startswith("^")} - {None}
                replica[node.name] = found.pop() if len(found) == 1 else None
    kept = {n.name for n in function.node_def if replica[n.name] in (None, split.k)}
    # Values one replica computes for all (ONLY_FIRST_REPLICA updates, as in the step's own graph: spmd.py's
    # _broadcast): read by another replica's nodes, so broadcast from their replica on every rank.
    sources = {t for n in function.node_def for t in n.input if not t.startswith("^") and
               None not in (replica[n.name], replica.get(_function_input(t))) and
               replica[n.name] != replica.get(_function_input(t))}
    by_name = {n.name: n for n in function.node_def}
    pulled = set()  # another replica's nodes this rank computes too: a value made once for all, with no copy here
    stack = [_function_input(t) for n in function.node_def if n.name in kept and replica[n.name] is not None
             for t in n.input if t in sources and _counterpart(split, _function_input(t), replica) is None]
    while stack:
        name = stack.pop()
        if name in by_name and name not in kept:
            kept.add(name)
            pulled.add(name)
            stack.extend(_function_input(t) for t in by_name[name].input if not t.startswith("^"))
    # Another replica's node waits for reads its copy here must wait for too (a host read of replica 0's copy
    # before its update, as spmd.py's _reads_before): its control inputs go to this rank's copy.
    waits: dict[str, list[str]] = {}
    for node in function.node_def:
        mine = _counterpart(split, node.name, replica) if node.name not in kept else None
        for t in node.input if mine in kept else ():
            if t.startswith("^"):
                source = _function_input(t)
                copy_of = _counterpart(split, source, replica) or (source if source in kept else None)
                if copy_of in kept:
                    waits.setdefault(mine, []).append("^" + copy_of)
    new = type(function)()
    new.CopyFrom(function)
    del new.node_def[:]
    sent: dict[str, str] = {}
    for node in function.node_def:
        if node.name not in kept:
            continue
        inputs = []
        for t in node.input:
            source = _function_input(t)
            if not t.startswith("^") and replica[node.name] is not None and t in sources and node.name not in pulled:
                inputs.append(sent.get(t) or _broadcast(split, new, t, replica, sent))
                continue
            if not t.startswith("^") and replica.get(source) not in (None, split.k) and node.name not in pulled:
                raise LoweringError(f"{where}: its node {node.name!r} (of rank {split.k}) reads {source!r} of replica "
                                    f"{replica.get(source)}; a rank's part cannot hold it")
            if not t.startswith("^") or source in kept:
                inputs.append(t)
        copy = new.node_def.add()
        copy.CopyFrom(node)
        del copy.input[:]
        copy.input.extend(unique_controls([*inputs, *waits.get(node.name, [])]))
    for name in [k for k, v in new.control_ret.items() if v not in kept]:
        del new.control_ret[name]
    del new.signature.control_output[:]
    new.signature.control_output.extend(sorted(new.control_ret))
    new.ret.clear()
    del new.signature.output_arg[:]
    return new


def _owner(split, tensor: str) -> int | None:
    """The replica of an input of the cond: a variable's device for a captured variable's handle."""
    entry = split.step.variables.get(parse_tensor(tensor)[0])
    if entry is not None and getattr(entry[2], "device", ""):
        return split.replicas.of(entry[2].device)
    return split._value_replica(tensor)


def _counterpart(split, name: str, replica: dict) -> str | None:
    """This rank's copy of function node `name` (named with a "replica_k" scope, as in spmd.py), or None."""
    owner = replica[name]
    if owner == split.k:
        return name
    base = [p for p in name.split("/") if p != f"replica_{owner}"]
    candidates = ["/".join(base)] if split.k == 0 else \
        ["/".join(base[:i] + [f"replica_{split.k}"] + base[i:]) for i in range(len(base))]
    # strategy.extended.update's per-device scopes: "update_<replica>" (mirrored_strategy.py, _update)
    candidates += ["/".join(re.sub(rf"^update_{owner}(?=_|$)", f"update_{split.k}", p) for p in name.split("/"))]
    return next((c for c in candidates if replica.get(c) == split.k), None)


def _broadcast(split, function, tensor: str, replica: dict, sent: dict[str, str]) -> str:
    """A CollectiveBcastSend in `function` of this rank's counterpart of `tensor` ("node:output:index"), from the
    rank of the replica that computes it."""
    name, _, rest = tensor.partition(":")
    owner = replica[name]
    mine = _counterpart(split, name, replica) or name
    node = function.node_def.add(name=f"{name}/hcom_broadcast", op="CollectiveBcastSend",
                                 input=[f"{mine}:{rest}" if rest else mine])
    node.attr[SPMD_ATTR].i, node.attr[ROOT_ATTR].i = split.replicas.world, split.replicas.first_rank + owner
    sent[tensor] = f"{node.name}:data:0"
    return sent[tensor]


def _merge_arguments(functions, inputs: list[str]) -> None:
    """Where two arguments are the same tensor on this rank (the copies of one MirroredVariable), the branches read
    the first one only (the second is then unused, and dropped)."""
    first: dict[str, int] = {}
    for j, tensor in enumerate(inputs):
        i = first.setdefault(tensor, j)
        if i == j:
            continue
        for function in functions:
            a, b = function.signature.input_arg[i].name, function.signature.input_arg[j].name
            for node in function.node_def:
                for k, t in enumerate(node.input):
                    if t.lstrip("^").split(":")[0] == b:
                        node.input[k] = t.replace(b, a, 1)


def rank_cond(split, node) -> tuple[Any, list[Any], dict[str, Any]]:
    """Rank k's copy of a cross-replica If, the nodes its predicate needs and its branches' new FunctionDefs."""
    where = f"TF {node.op} {node.name!r} (a cross-replica tf.cond: Keras's LossScaleOptimizer under MirroredStrategy)"
    if any(parse_tensor(t)[0] == node.name and not t.startswith("^") for n in split.nodes.values() for t in n.input):
        raise LoweringError(f"cannot lower {where}: its results are read, and each rank's part returns none")
    data = [t for t in node.input if not t.startswith("^")]
    controls = [t for t in node.input if t.startswith("^")]
    branches = [node.attr[a].func.name for a in ("then_branch", "else_branch")]
    functions = {}
    for name in branches:
        function = split.library[name]
        owners = {arg.name: _owner(split, t) for arg, t in zip(function.signature.input_arg, data[1:])}
        functions[name] = _split_function(split, function, owners, where)
    _merge_arguments(functions.values(), [split._aliased(t) for t in data[1:]])
    dropped = set.intersection(*(_unused(f) for f in functions.values()))
    for f in functions.values():
        _drop_arguments(f, dropped)
    new = type(node)()
    new.CopyFrom(node)
    del new.input[:]
    flag = _all_ranks_flag(split, node, data[0])
    new.input.extend([flag[-1].name, *(t for k, t in enumerate(data[1:]) if k not in dropped), *controls])
    types = [t for k, t in enumerate(node.attr["Tin"].list.type) if k not in dropped]
    del new.attr["Tin"].list.type[:]
    new.attr["Tin"].list.type.extend(types)
    del new.attr["Tout"].list.type[:]
    if "output_shapes" in new.attr:
        del new.attr["output_shapes"].list.shape[:]
    return new, flag, functions


def _all_ranks_flag(split, node, predicate: str) -> list[Any]:
    """Rank k's own predicate (the counterpart of replica 0's), all-reduced with min over the ranks: true where it is
    true on every rank."""
    name, index = parse_tensor(predicate)
    owner = split._value_replica(predicate)
    mine = f"{split._counterpart(name, owner) if owner is not None else name}:{index}"
    NodeDef = type(node)
    as_int = NodeDef(name=f"{node.name}/predicate_as_int32", op="Cast", input=[mine])
    as_int.attr["SrcT"].type, as_int.attr["DstT"].type = tf.bool.as_datatype_enum, tf.int32.as_datatype_enum
    size = NodeDef(name=f"{node.name}/predicate_group_size", op="Const")
    size.attr["dtype"].type = tf.int32.as_datatype_enum
    size.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.int32(split.replicas.world)))
    reduced = NodeDef(name=f"{node.name}/predicate_on_every_rank", op="CollectiveReduceV2",
                      input=[as_int.name, size.name])
    reduced.attr["T"].type = tf.int32.as_datatype_enum
    reduced.attr["merge_op"].s, reduced.attr["final_op"].s = b"Min", b"Id"
    reduced.attr[SPMD_ATTR].i = split.replicas.world
    as_bool = NodeDef(name=f"{node.name}/predicate_all_ranks", op="Cast", input=[reduced.name])
    as_bool.attr["SrcT"].type, as_bool.attr["DstT"].type = tf.int32.as_datatype_enum, tf.bool.as_datatype_enum
    return [as_int, size, reduced, as_bool]


def refuse_spanning(split, nodes) -> None:
    """Refuses a Case or While whose functions hold the work of several replicas (a cross-replica If is split:
    rank_cond), which no rank's part can hold."""
    for node in nodes:
        devices = function_devices(node, split.library) if node.op in ("Case", "StatelessCase", "While",
                                                                        "StatelessWhile") else set()
        owners = {split.replicas.of(d) for d in devices} - {None}
        if len(owners) > 1:
            raise LoweringError(
                f"cannot lower TF {node.op} {node.name!r} for data-parallel ranks: its functions run the work of "
                f"replicas {sorted(owners)} (a loop around strategy.run, such as several steps per call in "
                "tf.range, or a Case made in cross-replica context), which no one rank's graph can hold: only a "
                "cross-replica If is split by rank; lower one step per call (strategy.run outside the loop)")
