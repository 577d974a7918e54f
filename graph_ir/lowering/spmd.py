"""One rank's part of a tf.distribute step (SPMD: every rank runs the same GE graph on its own batch, Hcom ops doing
the collectives): what graph_ir.from_distributed lowers once per local replica.

A MirroredStrategy step traced in one tf.function holds every replica's copy of the step, each node placed on its
replica's device (tensorflow/python/distribute/mirrored_run.py runs the replica function once per device under
ops.device). Rank k's part is what replica k's outputs and stateful ops need, data and control:

- Each node's replica is the strategy's worker device its `device` attr names (a node without one: the device of the
  variable it reads, else none: shared by every rank). Control inputs from another replica's nodes are dropped (that
  replica's rank runs them); data inputs are followed wherever they lead, so a value computed once for all replicas
  (MirroredVariable.assign in cross-replica context: values.py's update on replica 0, copied to the others) is
  computed on every rank from its own copy of the variable. A data input of another replica's argument is refused.
- A MirroredVariable's per-replica components are one GE Variable, named like its primary (replica 0's) component and
  holding its value, on every rank (SPMD: the ranks' Variables have the same names); a SyncOnReadVariable's
  components are too, each rank holding its own replica's value.
- strategy.reduce's cross-replica AddN over the replicas' values becomes an all-reduce "sum" of this rank's value, and
  a stack of them (Keras fit's reduce_per_replica) an all-gather (graph_ir/lowering/spmd_host.py); the reduction
  after either stays.
- TF's collectives keep their data input (and group_size, shape); group_key, instance_key and ordering_token go
  (graph_ir/lowering/ops/hcom.py). Broadcasts learn the sending rank from the step's CollectiveBcastSend.
- A cross-replica tf.cond (Keras's LossScaleOptimizer's, made in merge_call) is split by rank, its predicate
  all-reduced (graph_ir/lowering/spmd_cond.py); collectives in If/Case branches: graph_ir/lowering/spmd_functions.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import tensorflow as tf

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.capture import ge_name, parse_tensor, variable_key
from graph_ir.lowering.lowerer import Lowerer
from graph_ir.lowering.ops.hcom import COLLECTIVES, ROOT_ATTR, SENDS, SPMD_ATTR
from graph_ir.lowering.replicas import Replicas, container
from graph_ir.lowering.spmd_cond import is_cross_replica, rank_cond, refuse_spanning
from graph_ir.lowering.spmd_functions import strip, strip_functions, unique_controls
from graph_ir.lowering.spmd_host import collective_of, cross_replica_inputs
from graph_ir.lowering.trace import Step

_PASS = ("Identity",)


class _Split:
    """Rank `k`'s part of `step` (module docstring); run() returns it as a Step."""

    def __init__(self, step: Step, replicas: Replicas, k: int):
        self.step, self.replicas, self.k = step, replicas, k
        self.nodes = {n.name: n for n in step.graph_def.node}
        self.alias: dict[str, str] = {}  # component placeholder -> the placeholder standing for its variable
        self.library = {f.signature.name: f for f in step.graph_def.library.function}
        self.functions: dict[str, Any] = {}  # rank k's copies of cross-replica conds' branches (spmd_cond.py)
        self.variables = self._variables()
        self.replica = {name: self._replica_of(node) for name, node in self.nodes.items()}
        self.writers: dict[str, list[str]] = {}  # variable placeholder (merged) -> the nodes writing it
        for node in self.nodes.values():
            for t in Lowerer._writes(node):
                source = parse_tensor(t)[0]
                self.writers.setdefault(self.alias.get(source, source), []).append(node.name)
        self.readers: dict[str, set[int | None]] = {}
        self.sources: set[str] = set()  # tensors other replicas read: broadcast from their replica
        for node in self.nodes.values():
            reader = self.replica[node.name]
            for t in node.input:
                source = parse_tensor(t)[0]
                self.readers.setdefault(source, set()).add(reader)
                owner = self.replica[source]
                if not t.startswith("^") and None not in (reader, owner) and reader != owner and \
                        cross_replica_inputs(self, node) is None:
                    self.sources.add(t if ":" in t else f"{t}:0")

    def _variables(self) -> dict[str, tuple[str, np.ndarray, Any]]:
        groups: dict[int, tuple[Any, list[str]]] = {}
        out = {}
        for name, entry in self.step.variables.items():
            owner = container(entry[2])
            if owner is None:
                out[name] = entry
            else:
                groups.setdefault(id(owner), (owner, []))[1].append(name)
        for owner, names in groups.values():
            components = list(owner.values)
            mine = components[self.k] if self.k < len(components) else components[0]
            by_var = {id(self.step.variables[n][2]): n for n in names}
            stand_in = by_var.get(id(mine), names[0])
            primary = components[0]
            source = mine if "SyncOnRead" in type(owner).__name__ else primary
            out[stand_in] = (ge_name(variable_key(primary), primary.name), np.array(source.numpy(), copy=True),
                             owner)
            self.alias.update({n: stand_in for n in names if n != stand_in})
        return out

    def _replica_of(self, node) -> int | None:
        if node.device or is_cross_replica(self, node):  # a cross-replica cond: every rank's (spmd_cond.py)
            return self.replicas.of(node.device) if node.device else None
        for t in node.input:  # a read of a variable: the variable's device
            entry = self.step.variables.get(parse_tensor(t)[0])
            if entry is not None and getattr(entry[2], "device", ""):
                return self.replicas.of(entry[2].device)
        return None

    def _value_replica(self, tensor: str) -> int | None:
        """The replica a tensor's value belongs to: through Identity copies; none after a cross-replica reduce."""
        name = parse_tensor(tensor)[0]
        while True:
            node = self.nodes[name]
            if node.op in COLLECTIVES or cross_replica_inputs(self, node) is not None:
                return None
            if node.op not in _PASS:
                return self.replica[name]
            name = parse_tensor(node.input[0])[0]

    def _foreign(self, name: str) -> bool:
        replica = self.replica.get(name)
        return replica is not None and replica != self.k

    def run(self) -> Step:
        step = self.step
        owners = [self._value_replica(t) for t in step.outputs]
        per_replica = any(o not in (None, 0) for o in owners)  # replica 0's device is the host's too (CPU:0)
        outputs = [t for t, o in zip(step.outputs, owners) if not per_replica or o in (None, self.k)]
        # A read that nothing reads changes nothing (TF runs it as a stateful op): kept only where a node needs it, so
        # that the ranks' graphs agree (a host read of replica 0's copy would be on one rank only).
        must_run = [n for n in step.must_run if not self._foreign(n) and self.nodes[n].op != "ReadVariableOp"]
        kept: dict[str, Any] = {}
        stack = [self.alias.get(parse_tensor(t)[0], parse_tensor(t)[0]) for t in outputs] + must_run
        while stack:
            name = stack.pop()
            if name in kept:
                continue
            for node in self._rewritten(self.nodes[name]):
                kept[node.name] = node
                stack.extend(parse_tensor(t)[0] for t in node.input if parse_tensor(t)[0] not in kept)
        refuse_spanning(self, kept.values())
        args = [a for a in step.args if a in kept]
        for arg in args:
            readers = self.readers.get(arg, set()) - {None}
            if readers and self.k not in readers:
                raise LoweringError(f"rank {self.replicas.first_rank + self.k}'s part of the step reads argument "
                                    f"{arg!r}, which only replica {min(readers)} reads: a value computed from another "
                                    "replica's batch cannot be computed on this rank (reduce it across replicas first)")
        graph_def = type(step.graph_def)()
        graph_def.versions.CopyFrom(step.graph_def.versions)
        graph_def.library.CopyFrom(step.graph_def.library)
        for function in graph_def.library.function:
            if function.signature.name in self.functions:
                function.CopyFrom(self.functions[function.signature.name])
        graph_def.node.extend([kept.pop(n.name) for n in step.graph_def.node if n.name in kept])
        graph_def.node.extend(kept.values())  # the group sizes added for strategy.reduce's sums
        return replace(step, graph_def=graph_def, args=args, variables=self.variables,
                       outputs=[self._aliased(t) for t in outputs], must_run=must_run)

    def _aliased(self, tensor: str) -> str:
        name, index = parse_tensor(tensor)
        if name not in self.alias:
            return tensor
        return ("^" if tensor.startswith("^") else "") + self.alias[name] + (f":{index}" if ":" in tensor else "")

    def _rewritten(self, node) -> list[Any]:
        """Rank k's copy of a node (and any node it needs added): inputs of merged variables renamed, other
        replicas' control inputs dropped, collectives stripped of their keys and marked."""
        new = type(node)()
        new.CopyFrom(node)
        extra = []
        summed = cross_replica_inputs(self, node)
        if summed is not None:  # strategy.reduce's AddN, reduce_per_replica's Pack (graph_ir/lowering/spmd_host.py)
            new, *more = collective_of(self, node, summed[[self._value_replica(t) for t in summed].index(self.k)])
            extra.extend(more)
        elif is_cross_replica(self, node):
            new, more, functions = rank_cond(self, node)
            extra.extend(more)
            self.functions.update(functions)
        elif node.op in COLLECTIVES:
            strip(new, self.replicas.world)
            root = self.replicas.first_rank + self.k if node.op in SENDS else self._sender(node)
            if root is not None:
                new.attr[ROOT_ATTR].i = root
        inputs = unique_controls(self._aliased(self._control(t)) for t in new.input if self._control(t))
        inputs += [t for t in self._reads_before(node) if t not in inputs]
        if self.replica[node.name] is not None:
            inputs = [self._broadcast(t, extra) if not t.startswith("^") and
                      (t if ":" in t else f"{t}:0") in self.sources else t for t in inputs]
        del new.input[:]
        new.input.extend(inputs)
        return [new, *extra]

    def _control(self, tensor: str) -> str | None:
        """A control input on this rank: another replica's read becomes this rank's copy of it, or stays where it
        is made once for all (a host read of replica 0's copy, which this rank makes too); another replica's other
        nodes are dropped (that replica's rank runs them)."""
        name = parse_tensor(tensor)[0]
        if not tensor.startswith("^") or not self._foreign(name):
            return tensor
        if self.nodes[name].op != "ReadVariableOp" or self.nodes[name].device:
            return None
        return "^" + self._counterpart(name, self.replica[name])

    def _reads_before(self, node) -> list[str]:
        """Control inputs for a write of a merged variable on this rank: the reads that another replica's write of
        its copy waits for (in this rank's counterpart, or the read itself where it is made once: a host read of
        replica 0's copy), so that on this rank too they read the value before the write."""
        if self.replica[node.name] != self.k:
            return []
        out = []
        for t in Lowerer._writes(node):
            source = parse_tensor(t)[0]
            for writer in self.writers.get(self.alias.get(source, source), []):
                owner = self.replica[writer]
                if owner is None or owner == self.k:
                    continue
                for c in self.nodes[writer].input:
                    read = parse_tensor(c)[0]
                    if c.startswith("^") and self.nodes[read].op == "ReadVariableOp":
                        out.append("^" + self._counterpart(read, self.replica[read] if self.replica[read] is not None
                                                           else owner))
        return out

    def _broadcast(self, tensor: str, extra: list[Any]) -> str:
        """A value one replica computes for all (a MirroredVariable's ONLY_FIRST_REPLICA update, values.py): on
        every rank, this rank's counterpart of it broadcast from that replica's rank, so that every rank runs the
        same graph and gets the sender's value."""
        name, index = parse_tensor(tensor)
        owner = self.replica[name]
        root = self.replicas.first_rank + owner
        sent = type(self.nodes[name])(name=f"{name}/hcom_broadcast_{index}", op="CollectiveBcastSend")
        sent.input.append(f"{self._counterpart(name, owner)}:{index}")
        sent.attr[SPMD_ATTR].i, sent.attr[ROOT_ATTR].i = self.replicas.world, root
        extra.append(sent)
        return sent.name

    def _counterpart(self, name: str, owner: int) -> str:
        """This rank's copy of node `name` of replica `owner`: TF names replica k's copy of a node made in the
        replica function with a "replica_k" scope (mirrored_run.py); `name` itself when there is none."""
        if owner == self.k:
            return name
        base = [p for p in name.split("/") if p != f"replica_{owner}"]
        candidates = ["/".join(base)] if self.k == 0 else \
            ["/".join(base[:i] + [f"replica_{self.k}"] + base[i:]) for i in range(len(base))]
        op = self.nodes[name].op
        return next((c for c in candidates if c in self.nodes and self.nodes[c].op == op and
                     self.replica[c] == self.k), name)

    def _keys(self, node) -> tuple | None:
        """A broadcast's (group_key, instance_key): attrs (V1) or Const inputs (V2); None when computed."""
        if node.op in ("CollectiveBcastSend", "CollectiveBcastRecv"):
            return node.attr["group_key"].i, node.attr["instance_key"].i
        data = [t for t in node.input if not t.startswith("^")]
        start = 2 if node.op == "CollectiveBcastSendV2" else 1
        keys = [self.nodes.get(parse_tensor(t)[0]) for t in data[start:start + 2]]
        if any(k is None or k.op != "Const" for k in keys):
            return None
        return tuple(int(tf.make_ndarray(k.attr["value"].tensor)) for k in keys)

    def _sender(self, recv) -> int | None:
        """The rank of the CollectiveBcastSend a receiver pairs with (same keys; the only one when keys are
        computed), if it is one of this worker's replicas."""
        senders = [n for n in self.nodes.values() if n.op in SENDS]
        keys = self._keys(recv)
        matching = [n for n in senders if keys is not None and self._keys(n) == keys] or \
            (senders if len(senders) == 1 else [])
        replica = self.replica[matching[0].name] if matching else None
        return None if replica is None else self.replicas.first_rank + replica


def rank_steps(step: Step, replicas: Replicas) -> list[Step]:
    """Each local replica's part of `step`, in replica order."""
    graph_def = type(step.graph_def)()
    graph_def.CopyFrom(step.graph_def)
    strip_functions(graph_def, replicas.world)  # the collectives of If/Case branches (graph_ir/lowering/spmd_functions)
    step = replace(step, graph_def=graph_def)
    return [_Split(step, replicas, k).run() for k in range(len(replicas.devices))]
