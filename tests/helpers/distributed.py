"""Training runs under tf.distribute strategies, each in its own process (logical devices and clusters must be set
up before TensorFlow starts), for tests/optimizers/test_distributed.py. Every wait is bounded.

    python -m tests.helpers.distributed mirrored OUT_DIR
    python -m tests.helpers.distributed worker INDEX PORTS OUT_DIR      (one MultiWorkerMirroredStrategy worker)
    python -m tests.helpers.distributed single OUT_DIR                  (the same custom loop on one device)
    python -m tests.helpers.distributed ps OUT_DIR                      (ParameterServerStrategy, in-process cluster)
"""

from __future__ import annotations

import json
import os
import socket
import sys

import numpy as np

OPTIMIZERS = ("powersign", "fused_ema_adam")
GLOBAL_BATCH, STEPS = 32, 4


def _optimizer(name: str):
    from tf_plugin.optimizers import FusedEmaAdam, PowerSign

    return PowerSign(0.01) if name == "powersign" else FusedEmaAdam(0.01, weight_decay=0.01, ema_decay=0.9)


def _data():
    from tests.helpers.models import classification_data

    return classification_data(7, n=GLOBAL_BATCH * STEPS)


def _custom_loop(strategy, name: str) -> list[np.ndarray]:
    """STEPS steps of apply_gradients; replica r (of all workers' replicas) sees its slice of each global batch; the
    loss is summed and divided by the global batch, so the all-reduced gradient is the global batch's mean gradient."""
    import keras
    import tensorflow as tf

    from tests.helpers.models import small_model

    x, y = _data()
    with strategy.scope():
        model = small_model()
        optimizer = _optimizer(name)
        optimizer.build(model.trainable_variables)  # slots made outside the step, as Keras's custom-loop guide does
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")

    @tf.function
    def step(batch):
        def replica_fn(batch):
            xb, yb = batch
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True)) / GLOBAL_BATCH
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))

        strategy.run(replica_fn, args=(batch,))

    per = GLOBAL_BATCH // strategy.num_replicas_in_sync
    for k in range(STEPS):
        def batch_of(context, k=k):
            first = k * GLOBAL_BATCH + context.replica_id_in_sync_group * per
            return tf.constant(x[first:first + per]), tf.constant(y[first:first + per])

        step(strategy.experimental_distribute_values_from_function(batch_of))
    return model.get_weights()


def _fit(strategy, name: str) -> list[np.ndarray]:
    import keras

    from tests.helpers.models import small_model

    x, y = _data()
    with strategy.scope():
        model = small_model()
        model.compile(optimizer=_optimizer(name), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=2, verbose=0, shuffle=False)
    return model.get_weights()


def _outside_scope(strategy, name: str) -> list[np.ndarray]:
    """STEPS steps of tf.function(lambda x, y: model.train_step((x, y))) called outside strategy.scope() (the model
    and optimizer made inside it): every replica's copy of every weight, replica after replica."""
    import keras
    import tensorflow as tf

    from tests.helpers.models import small_model

    x, y = _data()
    with strategy.scope():
        model = small_model()
        model.compile(optimizer=_optimizer(name), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.optimizer.build(model.trainable_variables)
    step = tf.function(lambda xb, yb: model.train_step((xb, yb)))
    for k in range(STEPS):
        step(x[k * GLOBAL_BATCH:(k + 1) * GLOBAL_BATCH], y[k * GLOBAL_BATCH:(k + 1) * GLOBAL_BATCH])
    copies = [getattr(v.value, "values", (v.value,)) for v in model.trainable_variables]
    return [c.numpy() for r in range(len(copies[0])) for c in (each[r] for each in copies)]


def _save(out: str, tag: str, weights: list[np.ndarray]) -> None:
    np.savez(os.path.join(out, f"{tag}.npz"), *weights)


def mirrored(out: str) -> None:
    """MirroredStrategy over 2 logical CPUs against one device: fit, a custom loop, and Keras's train_step called
    outside strategy.scope()."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import tf_plugin  # noqa: F401

    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    two = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    for name in OPTIMIZERS:
        _save(out, f"fit-single-{name}", _fit(one, name))
        _save(out, f"fit-mirrored-{name}", _fit(two, name))
        _save(out, f"loop-single-{name}", _custom_loop(one, name))
        _save(out, f"loop-mirrored-{name}", _custom_loop(two, name))
        _save(out, f"outside-single-{name}", _outside_scope(one, name))
        _save(out, f"outside-mirrored-{name}", _outside_scope(two, name))


def worker(index: int, ports: list[str], out: str) -> None:
    strategy = multi_worker_strategy(index, ports)
    for name in OPTIMIZERS:
        weights = _custom_loop(strategy, name)
        if index == 0:
            _save(out, f"multiworker-{name}", weights)
        # train_step called outside strategy.scope(), each worker on the whole batch: every worker's weights. (Keras
        # 3's fit under this strategy fails for Keras's own optimizers too, converting a PerReplica batch to a tensor.)
        _save(out, f"multiworker-outside-{name}-w{index}", _outside_scope(strategy, name))


def single(out: str) -> None:
    import tensorflow as tf

    import tf_plugin  # noqa: F401

    for name in OPTIMIZERS:
        one = tf.distribute.OneDeviceStrategy("/cpu:0")
        _save(out, f"multiworker-reference-{name}", _custom_loop(one, name))
        _save(out, f"multiworker-outside-reference-{name}", _outside_scope(one, name))


def run_workers(commands: list[list[str]], env: dict, cwd: str, timeout: float) -> None:
    """Starts each command as a process, waits for all of them within `timeout` seconds, and kills every one at the
    end, even when a wait fails; asserts each exited with 0 (its stderr's tail as the message)."""
    import subprocess

    workers = [subprocess.Popen(c, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for c in commands]
    try:
        outputs = [w.communicate(timeout=timeout) for w in workers]
    finally:
        for w in workers:
            w.kill()
    for w, (_, err) in zip(workers, outputs):
        assert w.returncode == 0, err[-3000:]


def multi_worker_strategy(index: int, ports: list[str]):
    """Worker `index` of a MultiWorkerMirroredStrategy cluster on 127.0.0.1 `ports` (TF_CONFIG set before TensorFlow
    starts), every collective bounded by 60 s; tf_plugin's ops loaded, as every worker process must."""
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                                          "task": {"type": "worker", "index": index}})
    import tensorflow as tf

    import tf_plugin  # noqa: F401

    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=60)
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def free_ports(count: int) -> list[str]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [str(s.getsockname()[1]) for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _ps_step(strategy, model, optimizer, loss_fn):
    import tensorflow as tf

    @tf.function
    def step(iterator):
        def replica_fn(batch):
            xb, yb = batch
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True))
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        return strategy.run(replica_fn, args=(next(iterator),))

    return step


def parameter_server(out: str) -> None:
    """An in-process cluster (2 workers, 1 ps on loopback) and a coordinator training a Keras model with each
    optimizer: the optimizer's variables live on the ps, the updates run there (where tf_plugin is loaded)."""
    import keras
    import tensorflow as tf

    import tf_plugin  # noqa: F401
    from tests.helpers.models import small_model

    ports = free_ports(3)
    cluster = tf.train.ClusterSpec({"worker": [f"127.0.0.1:{p}" for p in ports[:2]], "ps": [f"127.0.0.1:{ports[2]}"]})
    config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=3)  # 2 cores: enough threads for 3 servers
    for job, count in (("worker", 2), ("ps", 1)):
        for i in range(count):
            tf.distribute.Server(cluster, job_name=job, task_index=i, protocol="grpc", config=config, start=True)
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, rpc_layer="grpc")
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    x, y = _data()
    results = {}
    for name in OPTIMIZERS:
        with strategy.scope():
            model = small_model()
            optimizer = _optimizer(name)
            optimizer.build(model.trainable_variables)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        dataset = coordinator.create_per_worker_dataset(
            lambda: tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH))
        iterator = iter(dataset)
        step = _ps_step(strategy, model, optimizer, loss_fn)
        losses = [coordinator.schedule(step, args=(iterator,)) for _ in range(24)]
        coordinator.join()
        values = [float(loss.fetch()) for loss in losses]
        results[name] = {"first": float(np.mean(values[:4])), "last": float(np.mean(values[-4:])),
                         "finite": bool(np.all(np.isfinite(values))),
                         "ps_device": model.trainable_variables[0].value.device}
    with open(os.path.join(out, "parameter_server.json"), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "mirrored":
        mirrored(args[0])
    elif command == "worker":
        worker(int(args[0]), args[1].split(","), args[2])
    elif command == "single":
        single(args[0])
    elif command == "ps":
        parameter_server(args[0])
    else:
        sys.exit(f"unknown command {command!r}")
