"""One MultiWorkerMirroredStrategy worker (loopback gRPC, every wait bounded) lowering its trace of a custom-loop step
with graph_ir.from_distributed, for tests/graph_ir/test_distributed_lowering.py:

    python -m tests.helpers.distributed_workers INDEX PORTS OUT_DIR OPTIMIZER

Worker INDEX writes OUT_DIR/OPTIMIZER/rank{INDEX}.air (its one graph: one replica per worker) and feeds{INDEX}.npz,
then runs the steps in TF; worker 0 also writes OUT_DIR/OPTIMIZER.json and expected.npz, in the layout of
tests/helpers/distributed_lowering.py, for tests/helpers/distributed_lowering_ranks.py to run the graphs against.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from tests.helpers.distributed import multi_worker_strategy
from tests.helpers.distributed_lowering import PER_REPLICA, STEPS, _tf_values, built


def main(index: int, ports: list[str], out: str, name: str) -> None:
    strategy = multi_worker_strategy(index, ports)
    import tensorflow as tf

    import graph_ir
    n = strategy.num_replicas_in_sync
    model, optimizer, x, y, loss_fn = built(strategy, name)

    @tf.function
    def step(xb, yb):
        def replica_fn(xb, yb):
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True)) / (n * PER_REPLICA)
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        return strategy.reduce("SUM", strategy.run(replica_fn, args=(xb, yb)), axis=None)

    def batch(k: int):
        first = (k * n + index) * PER_REPLICA
        return x[first:first + PER_REPLICA], y[first:first + PER_REPLICA].astype(np.int64)

    graphs = graph_ir.from_distributed(step, *(tf.constant(a) for a in batch(0)), strategy=strategy)
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    graphs[0].save(os.path.join(folder, f"rank{index}.air"))
    np.savez(os.path.join(folder, f"feeds{index}.npz"), *[a for k in range(STEPS) for a in batch(k)])
    losses = [float(step(*(tf.constant(a) for a in batch(k)))) for k in range(STEPS)]
    expected = _tf_values(graphs[0], [*model.variables, *optimizer.variables], 1)
    if index == 0:
        compared = sorted(expected)
        hcom = [(node.type, dict(node.attrs)) for g in (graphs[0], *graphs[0].subgraphs.values())
                for node in g.nodes.values() if node.type.startswith("Hcom")]
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump({"ranks": len(graphs), "compared": compared, "hcom": hcom}, f, default=str)
        np.savez(os.path.join(folder, "expected.npz"), losses=np.array(losses),
                 **{f"v{i}_r{r}": expected[k][0] for i, k in enumerate(compared) for r in range(n)})


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3], sys.argv[4])
