"""The replicas of a tf.distribute strategy, as graph_ir.from_distributed splits a step by them
(graph_ir/lowering/spmd.py): their devices in replica order, the number of ranks, and the DistributedVariable a
per-replica variable belongs to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from graph_ir.ir.errors import LoweringError


@dataclass(frozen=True)
class Replicas:
    """The strategy's local replicas: their devices in replica order, how many ranks there are in all (every
    worker's replicas) and the rank of local replica 0."""

    devices: tuple[tuple, ...]
    world: int
    first_rank: int

    def of(self, device: str) -> int | None:
        key = _device_key(device) if device else None
        return self.devices.index(key) if key in self.devices else None


def _device_key(device: str) -> tuple:
    spec = tf.DeviceSpec.from_string(device)
    return (spec.device_type.upper() if spec.device_type else "CPU", spec.device_index or 0, spec.task or 0)


def replicas_of(strategy: Any) -> Replicas:
    """The Replicas of a MirroredStrategy or MultiWorkerMirroredStrategy (its worker devices; the rank of this
    worker's first replica from its place in the cluster, collective_all_reduce_strategy.py's _id_in_cluster)."""
    extended = getattr(strategy, "extended", None)
    devices = getattr(extended, "worker_devices", None)
    if not devices:
        raise LoweringError(f"strategy= must be a tf.distribute MirroredStrategy or MultiWorkerMirroredStrategy, got "
                            f"{type(strategy).__name__}")
    world = int(strategy.num_replicas_in_sync)
    task = int(getattr(extended, "_id_in_cluster", None) or 0)
    return Replicas(tuple(_device_key(d) for d in devices), world, task * len(devices))


def container(var: Any) -> Any:
    """The DistributedVariable (MirroredVariable, SyncOnReadVariable) a per-replica component belongs to, or None:
    values.py's DistributedVariable.__init__ leaves a weakref to it on each component's handle."""
    for owner in (getattr(var, "handle", None), var):
        ref = getattr(owner, "_distributed_container", None)
        if callable(ref):
            return ref()
    return None
