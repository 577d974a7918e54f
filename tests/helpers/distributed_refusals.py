"""What graph_ir.from_distributed refuses, and the uniform branches it lowers, under MirroredStrategy on 2 logical
CPUs, in a process of its own (logical devices must be set before TensorFlow starts), for
tests/graph_ir/test_distributed_refusals.py:

    python -m tests.helpers.distributed_refusals OUT_DIR

It writes OUT_DIR/cases.json: {case: {"lowered": [Hcom and If node types of rank 0's graph and subgraphs]} or
{"refused": the LoweringError's message}}.
"""

from __future__ import annotations

import json
import os
import sys

N = 2


def _outcome(lower) -> dict:
    import graph_ir

    try:
        graphs = lower()
    except graph_ir.LoweringError as e:
        return {"refused": str(e)}
    graphs = graphs if isinstance(graphs, list) else [graphs]
    nodes = [n for g in (graphs[0], *graphs[0].subgraphs.values()) for n in g.nodes.values()]
    return {"lowered": [n.type for n in nodes if n.type.startswith("Hcom") or n.type in ("If", "While")],
            "ranks": len(graphs),
            "divides": sum(n.type == "RealDiv" for n in nodes)}


def main(out: str) -> None:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * N)
    import keras

    import graph_ir
    from tests.helpers.models import small_model

    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(N)])
    with strategy.scope():
        v = tf.Variable(1.0)
    spec = tf.TensorSpec([4], tf.float32)
    keys = iter(range(1000, 2000))

    def all_reduce(x):  # TF's own collective, as cross_device_ops.py issues it, without merge_call
        return tf.raw_ops.CollectiveReduceV2(input=x, group_size=N, group_key=7, instance_key=next(keys),
                                             ordering_token=[], merge_op="Add", final_op="Id")

    def stepping(body, how="SUM"):
        @tf.function
        def step(x):
            return strategy.reduce(how, strategy.run(body, args=(x,)), axis=None)

        return step

    replica = tf.distribute.get_replica_context
    cases = {
        "data_cond": stepping(lambda x: tf.cond(tf.reduce_sum(x) > 0, lambda: all_reduce(x), lambda: x * 2.0)),
        "replica_id_cond": stepping(lambda x: tf.cond(replica().replica_id_in_sync_group == 0,
                                                      lambda: all_reduce(x), lambda: x * 2.0)),
        "uniform_cond": stepping(lambda x: tf.cond(v > 0, lambda: all_reduce(x), lambda: x * 2.0)),
        "reduced_cond": stepping(lambda x: tf.cond(all_reduce(tf.reduce_sum(x, keepdims=True))[0] > 0,
                                                   lambda: all_reduce(x), lambda: x * 2.0)),
        "mean": stepping(lambda x: replica().all_reduce("MEAN", x * 3.0), how="MEAN"),
        # loops inside the replica: the trip count from the rank's own data, or from a counter alone while the
        # rank's data rides in the loop state
        "data_loop": stepping(lambda x: tf.while_loop(lambda i, y: tf.reduce_sum(y) < 100.0,
                                                      lambda i, y: (i + 1, all_reduce(y) + 1.0), (0, x))[1]),
        "counted_loop": stepping(lambda x: tf.while_loop(lambda i, y: i < 3,
                                                         lambda i, y: (i + 1, all_reduce(y) * 0.5 + x), (0, x))[1]),
    }
    results = {name: _outcome(lambda step=step: graph_ir.from_distributed(step, spec, strategy=strategy))
               for name, step in cases.items()}
    results["from_tensorflow"] = _outcome(lambda: graph_ir.from_tensorflow(cases["uniform_cond"], spec))

    @tf.function
    def looped(x):  # several steps per call: a tf.range loop around strategy.run
        total = tf.constant(0.0)
        for _ in tf.range(2):
            total += strategy.reduce("SUM", strategy.run(lambda x: tf.reduce_sum(x * v), args=(x,)), axis=None)
        return total

    results["loop_around_run"] = _outcome(lambda: graph_ir.from_distributed(looped, spec, strategy=strategy))

    def stacked(order):  # Keras fit's reduce_per_replica: the mean of the stacked local results
        @tf.function
        def step(x):
            values = strategy.experimental_local_results(strategy.run(lambda x: tf.reduce_sum(x * v), args=(x,)))
            return tf.reduce_mean(tf.stack([values[i] for i in order]), axis=0)

        return step

    # each replica's own batch: a stack out of replica order would need another replica's batch on a rank
    batch = strategy.experimental_distribute_values_from_function(
        lambda context: tf.fill([4], tf.cast(context.replica_id_in_sync_group, tf.float32)))
    for name, step in {"stacked": stacked(range(N)), "stacked_reversed": stacked(reversed(range(N))),
                       "same_input_twice": stepping(lambda x: replica().all_reduce("SUM", tf.reduce_sum(x - x) + x))
                       }.items():
        results[name] = _outcome(lambda step=step: graph_ir.from_distributed(step, batch, strategy=strategy))
    with strategy.scope():
        model = small_model()
        optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
        optimizer.build(model.trainable_variables)

    @tf.function
    def scaled_step(x, y):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(keras.losses.sparse_categorical_crossentropy(y, model(x), from_logits=True))
                scaled = optimizer.scale_loss(loss)
            optimizer.apply_gradients(zip(tape.gradient(scaled, model.trainable_variables),
                                          model.trainable_variables))
            return loss

        return strategy.reduce("SUM", strategy.run(replica_fn, args=(x, y)), axis=None)

    specs = (tf.TensorSpec([4, 8], tf.float32), tf.TensorSpec([4], tf.int64))
    results["loss_scale_optimizer"] = _outcome(lambda: graph_ir.from_distributed(scaled_step, *specs))
    results["loss_scale_optimizer_missing"] = {"missing": {k: v for k, v in graph_ir.missing_ops(scaled_step,
                                                                                                 *specs).items()}}
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1])
