"""A training script "already ported to Ascend's collective API" (tf_plugin.hccl.hccl_ops in place of
npu_bridge.hccl.hccl_ops) and TF's MirroredStrategy run of the same steps, for tests/distributed/test_hccl_tf_training.py:

    python -m tests.helpers.hccl_tf_training mirrored OUT_DIR                          (2 logical CPUs)
    mpiexec -n 2 python -m mpi4py -m tests.helpers.hccl_tf_training ranks OUT_DIR      (2 CPU ranks)

ranks: each rank builds the model with its own initial weights, broadcasts every variable from rank 0 (as
npu_bridge's broadcast_global_variables does), then runs STEPS custom-loop steps on its half of each global batch:
the loss averaged over its half, the gradients all-reduced ("sum") and divided by the rank count (as
npu_distributed_optimizer_wrapper does), Keras SGD with momentum. Before the steps it lowers the step with
graph_ir.from_tensorflow and saves rank{r}.air; after them it runs that graph for STEPS steps in a graph_ir.Session
joined to the world group. Rank r writes tf{r}.npz and ge{r}.npz (the losses and every variable, by GE name) and
rank{r}.json (the TF step's Hcom ops and the lowered graph's Hcom nodes, with their attributes).
mirrored: the same model (rank 0's weights) and steps under MirroredStrategy, one replica per half batch; writes
mirrored.npz (the losses and every variable, by GE name from rank 0's lowered graph, read by the test).
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

STEPS, PER_RANK, RANKS, FEATURES, CLASSES, LR = 3, 4, 2, 5, 3, 0.1


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(42)
    rows = STEPS * RANKS * PER_RANK
    return rng.standard_normal((rows, FEATURES)).astype(np.float32), rng.integers(0, CLASSES, rows).astype(np.int32)


def shard(k: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Rank (replica) r's half of global batch k."""
    x, y = data()
    first = (k * RANKS + r) * PER_RANK
    return x[first:first + PER_RANK], y[first:first + PER_RANK]


def built(seed: int):
    """(model, optimizer): two Dense layers with weights drawn from `seed`, Keras SGD with momentum (slots built)."""
    import keras

    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(CLASSES)])
    rng = np.random.default_rng(seed)
    model.set_weights([rng.standard_normal(w.shape).astype(np.float32) * 0.5 for w in model.get_weights()])
    optimizer = keras.optimizers.SGD(LR, momentum=0.9)
    optimizer.build(model.trainable_variables)
    return model, optimizer


def ranks(out: str) -> None:
    import keras
    import tensorflow as tf

    import graph_ir
    from graph_ir.distributed import world
    from tf_plugin.hccl import hccl_ops

    group = world()
    rank, size = group.rank, group.size
    model, optimizer = built(seed=rank)  # different weights on each rank until the broadcast
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # the mean over this rank's half

    @tf.function
    def broadcast_variables():
        for v, value in zip(model.variables, hccl_ops.broadcast([v.value for v in model.variables], 0)):
            v.assign(value)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = [hccl_ops.allreduce(g, "sum") / size for g in tape.gradient(loss, model.trainable_variables)]
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return hccl_ops.allreduce(loss, "sum") / size  # the global batch's mean loss, on every rank

    broadcast_variables()
    specs = (tf.TensorSpec([PER_RANK, FEATURES]), tf.TensorSpec([PER_RANK], tf.int32))
    graph = graph_ir.from_tensorflow(step, *specs)  # the synced weights, before any step
    graph.save(os.path.join(out, f"rank{rank}.air"))
    names = {graph.variable_name(v): v for v in [*model.variables, *optimizer.variables]
             if _has_name(graph, v)}
    tf_ops = [op for op in step.get_concrete_function(*specs).graph.get_operations() if op.type.startswith("Hcom")]
    losses = [float(step(*shard(k, rank))) for k in range(STEPS)]
    np.savez(os.path.join(out, f"tf{rank}.npz"), losses=np.array(losses),
             **{name: np.asarray(v) for name, v in names.items()})

    session = graph_ir.Session(group=group)
    session.add_graph(0, graph_ir.load(os.path.join(out, f"rank{rank}.air")))
    ge_losses = [float(np.asarray(session.run_graph(0, list(shard(k, rank)))[0]).reshape(())) for k in range(STEPS)]
    values = session.get_variables(sorted(names))
    np.savez(os.path.join(out, f"ge{rank}.npz"), losses=np.array(ge_losses), **dict(zip(sorted(names), values)))
    hcom = [n for n in graph.topological_order() if n.type.startswith("Hcom")]
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"tf": [[op.type, {a: _plain(op.get_attr(a)) for a in ("reduction", "group", "fusion",
                                                                           "fusion_id") if a in op.node_def.attr}]
                          for op in tf_ops],
                   "ge": [[n.type, {a: n.attrs[a] for a in ("reduction", "group", "fusion", "fusion_id")}]
                          for n in hcom]}, f)


def _has_name(graph, v) -> bool:
    try:
        graph.variable_name(v)
        return True
    except KeyError:
        return False


def _plain(value):
    return value.decode() if isinstance(value, bytes) else value


def mirrored(out: str) -> None:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * RANKS)
    import keras

    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(RANKS)])
    with strategy.scope():
        model, optimizer = built(seed=0)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")

    @tf.function
    def step(x, y):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True)) / (RANKS * PER_RANK)
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        return strategy.reduce("SUM", strategy.run(replica_fn, args=(x, y)), axis=None)

    def batch(k: int):
        return tuple(strategy.experimental_distribute_values_from_function(
            lambda ctx, i=i: tf.constant(shard(k, ctx.replica_id_in_sync_group)[i])) for i in range(2))

    losses = [float(step(*batch(k))) for k in range(STEPS)]
    values = {}
    for v in [*model.variables, *optimizer.variables]:
        copies = [np.asarray(c) for c in v.values] if hasattr(v, "values") else [np.asarray(v)]
        values[v.path] = copies[0]
        assert all(np.array_equal(c, copies[0]) for c in copies), v.path
    np.savez(os.path.join(out, "mirrored.npz"), losses=np.array(losses), **values)


if __name__ == "__main__":
    {"ranks": ranks, "mirrored": mirrored}[sys.argv[1]](sys.argv[2])
