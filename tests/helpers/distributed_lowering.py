"""Custom-loop steps under MirroredStrategy on N logical CPUs, lowered with graph_ir.from_distributed, in a process of
their own (logical devices must be set before TensorFlow starts), for tests/graph_ir/test_distributed_lowering.py.

    python -m tests.helpers.distributed_lowering N OUT_DIR OPTIMIZER...

For each optimizer it writes OUT_DIR/<optimizer>.json (the rank graphs' op types, Hcom attrs, Variable names,
missing_ops, whether the ranks' structures agree and their .air files load) and, in OUT_DIR/<optimizer>/, each rank's
graph (rank{r}.air) and batches of K steps (feeds{r}.npz), and what K steps of TF's own MirroredStrategy run give
(expected.npz: the loss of each step, every variable on every replica, named as report["compared"] lists them),
for the MPI job of tests/helpers/distributed_lowering_ranks.py to run the graphs against.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from tests.helpers import distributed_cases as cases

STEPS, PER_REPLICA = 3, 4


def _optimizer(name: str):
    import keras

    from tf_plugin.optimizers import FusedEmaAdam, PowerSign

    inner = {"sgd": lambda: keras.optimizers.SGD(0.1, momentum=0.9), "adam": lambda: keras.optimizers.Adam(0.01),
             "fused_ema_adam": lambda: FusedEmaAdam(0.01, weight_decay=0.01, ema_decay=0.9),
             "powersign": lambda: PowerSign(0.01)}[name.removeprefix("embedding_").removeprefix("loss_scale_")]()
    # "loss_scale_<optimizer>": Keras's LossScaleOptimizer around it (a cross-replica cond on the finite check)
    return keras.optimizers.LossScaleOptimizer(inner) if name.startswith("loss_scale_") else inner


def _model_and_data(name: str, rows: int):
    """small_model on classification_data; for "embedding_<optimizer>", an Embedding (sparse gradients: gathered
    across replicas, CollectiveGatherV2) and a Dense layer on token ids."""
    from tests.helpers.models import classification_data, seeded_embedding_model, small_model

    x, y = classification_data(3, n=rows)
    if not name.startswith("embedding_"):
        return small_model(), x, y
    tokens = np.random.default_rng(5).integers(0, 20, (rows, 6)).astype(np.int32)
    return seeded_embedding_model(with_input=True), tokens, y


def _scale_diff(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b))))) if a.size else 0.0


def built(strategy, name: str):
    """(model, optimizer, x, y, loss_fn): the model and optimizer made in the strategy's scope, with the slots built
    outside the step, and data for STEPS global batches; the loss summed (divided by the global batch in the step)."""
    import keras

    n = strategy.num_replicas_in_sync
    with strategy.scope():
        if cases.is_case(name):
            model, x, y = cases.model_and_data(name, n * PER_REPLICA * STEPS)
            optimizer = cases.optimizer(name, n)
            cases.compile_for_fit(name, model, optimizer)
        else:
            model, x, y = _model_and_data(name, n * PER_REPLICA * STEPS)
            optimizer = _optimizer(name)
        optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")
    return model, optimizer, x, y, loss_fn


def run(strategy, out: str, name: str) -> dict:
    import tensorflow as tf

    import graph_ir
    from graph_ir.lowering.distributed import structure

    n = strategy.num_replicas_in_sync
    model, optimizer, x, y, loss_fn = built(strategy, name)
    global_batch = n * PER_REPLICA

    step = cases.step(name, strategy, model, optimizer, loss_fn, global_batch)

    def batch(k: int, r: int):
        first = (k * n + r) * PER_REPLICA
        return x[first:first + PER_REPLICA], y[first:first + PER_REPLICA].astype(np.int64)

    def distributed(k: int):
        def of(context):
            xb, yb = batch(k, context.replica_id_in_sync_group)
            return tf.constant(xb), tf.constant(yb)

        return tuple(strategy.experimental_distribute_values_from_function(of))  # (PerReplica x, PerReplica y)

    first = cases.arguments(name, *distributed(0))
    graphs = graph_ir.from_distributed(step, *first, strategy=strategy)
    report: dict = {"ranks": len(graphs), "case": name}
    everywhere = [[n for sub in (g, *g.subgraphs.values()) for n in sub.nodes.values()] for g in graphs]
    report["types"] = [sorted({node.type for node in nodes}) for nodes in everywhere]  # subgraphs' too
    report["hcom"] = [[(node.type, dict(node.attrs)) for node in nodes if node.type.startswith("Hcom")]
                      for nodes in everywhere]
    report["variables"] = [sorted(node.name for node in g.nodes_of_type("Variable")) for g in graphs]
    report["same_structure"] = all(structure(g) == structure(graphs[0]) for g in graphs)
    report["missing_ops"] = dict(graph_ir.missing_ops(step, *first))
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    loaded = []
    for r, g in enumerate(graphs):
        path = os.path.join(folder, f"rank{r}.air")
        g.save(path)
        loaded.append(graph_ir.load(path))
        np.savez(os.path.join(folder, f"feeds{r}.npz"), *[a for k in range(STEPS) for a in batch(k, r)])
    report["loaded_same"] = all(structure(a) == structure(b) for a, b in zip(graphs, loaded))
    # TF's own run, from the values the graphs captured (the ranks run them: tests/helpers/distributed_lowering_ranks)
    losses = cases.fit_losses(model, x, y, global_batch, STEPS) if name == "fit_sgd" else \
        [float(step(*distributed(k))) for k in range(STEPS)]
    expected = _tf_values(graphs[0], [*model.variables, *optimizer.variables, *model.metrics_variables], n)
    report["compared"] = sorted(expected)
    report["zero_gradient"] = [graphs[0].variable_name(v) for v in cases.zero_gradient(name, model)]
    report["per_replica"] = [graphs[0].variable_name(v) for v in cases.per_replica(name, model)]
    np.savez(os.path.join(folder, "expected.npz"), losses=np.array(losses),
             **{f"v{i}_r{r}": expected[k][r] for i, k in enumerate(report["compared"]) for r in range(n)})
    return report


def _tf_values(graph, variables, n: int) -> dict[str, list[np.ndarray]]:
    """Each TF variable's value on every replica, by the GE Variable that holds it: the variable's own, or the parts
    of a flat optimizer state (FusedEmaAdam's and PowerSign's m, v, s: Graph.flat_state_parts)."""
    out = {}
    for v in variables:
        copies = [c.numpy() for c in v.value.values] if hasattr(getattr(v, "value", None), "values") else \
            [np.asarray(v)] * n
        try:
            out[graph.variable_name(v)] = copies
            continue
        except KeyError:
            pass
        try:
            parts = graph.flat_state_parts(v)
        except KeyError:
            continue
        for name, start, shape in parts:
            size = int(np.prod(shape))
            out[name] = [c.reshape(-1)[start:start + size].reshape(shape) for c in copies]
    return out


def main(n: int, out: str, names: list[str]) -> None:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    import tf_plugin  # noqa: F401

    # One strategy for every case: TF's collective instance keys are the strategy's, and two strategies of one
    # process hand out the same keys (their collectives then meet each other's).
    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(n)])
    for name in names:
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump(run(strategy, out, name), f, default=str)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3:])
