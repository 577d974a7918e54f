"""One MultiWorkerMirroredStrategy worker (loopback gRPC, every wait bounded) whose step runs several training steps
per call: a tf.range loop around strategy.run, so that the collectives (the gradients' all-reduce, the loss's
strategy.reduce) sit inside a While body. For tests/graph_ir/test_distributed_loops.py:

    python -m tests.helpers.distributed_loop_workers INDEX PORTS OUT_DIR OPTIMIZER

Worker INDEX lowers its trace with graph_ir.from_distributed (one replica per worker: one graph, its rank's) to
OUT_DIR/OPTIMIZER/rank{INDEX}.air with its batches (feeds{INDEX}.npz: the STEPS batches stacked, one call), runs the
call in TF, and worker 0 writes OUT_DIR/OPTIMIZER.json and expected.npz in the layout of
tests/helpers/distributed_lowering.py, for tests/helpers/distributed_lowering_ranks.py to run the graphs against.
MirroredStrategy cannot trace such a loop at all (its merge_call refuses control flow around a synchronization point);
a multi-worker strategy with one device per worker emits its collectives in the replica's own graph.
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

    def replica_fn(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True)) / (n * PER_REPLICA)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    @tf.function
    def steps(xs, ys):
        """STEPS training steps in one call; the sum of their losses."""
        total = tf.zeros([])
        for k in tf.range(STEPS):
            total += strategy.reduce("SUM", strategy.run(replica_fn, args=(xs[k], ys[k])), axis=None)
        return total

    rows = [slice((k * n + index) * PER_REPLICA, (k * n + index + 1) * PER_REPLICA) for k in range(STEPS)]
    xs, ys = np.stack([x[r] for r in rows]), np.stack([y[r] for r in rows]).astype(np.int64)
    graphs = graph_ir.from_distributed(steps, tf.constant(xs), tf.constant(ys), strategy=strategy)
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    graphs[0].save(os.path.join(folder, f"rank{index}.air"))
    np.savez(os.path.join(folder, f"feeds{index}.npz"), xs, ys)
    total = float(steps(tf.constant(xs), tf.constant(ys)))
    expected = _tf_values(graphs[0], [*model.variables, *optimizer.variables], 1)
    if index == 0:
        compared = sorted(expected)
        hcom = [(node.type, dict(node.attrs), g.name) for g in (graphs[0], *graphs[0].subgraphs.values())
                for node in g.nodes.values() if node.type.startswith("Hcom")]
        inputs = [(node.name, list(node.output_descs[0].shape)) for node in graphs[0].nodes_of_type("Data")]
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump({"ranks": len(graphs), "compared": compared, "hcom": hcom, "inputs": inputs,
                       "types": sorted({node.type for node in graphs[0].nodes.values()})}, f, default=str)
        np.savez(os.path.join(folder, "expected.npz"), losses=np.array([total]),
                 **{f"v{i}_r{r}": expected[k][0] for i, k in enumerate(compared) for r in range(n)})


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3], sys.argv[4])
