"""Every rank of an MPI job that is also a MultiWorkerMirroredStrategy worker (its rank is its worker index, the
workers on loopback gRPC): it lowers its own trace of a custom-loop Adam step with graph_ir.from_distributed and
compares the rank's graph with its TF replica, node by node, with graph_ir.compare.compare_step in a Session joined to
the world group. For tests/distributed/test_compare_rank.py:

    mpiexec -n 2 python -m mpi4py -m tests.helpers.compare_ranks PORTS OUT_DIR

Writes OUT_DIR/rank{r}.json: the comparison of the graph as lowered, and of the same graph with every HcomAllReduce's
reduction made "max" (a wrong collective, on every rank alike so that the graphs still agree): its rows' count,
whether every row is within, the Hcom rows and the first defect.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from tests.helpers.distributed import multi_worker_strategy


def _summary(comparison) -> dict:
    rows = comparison.rows
    defect = comparison.first_defect
    return {"rows": len(rows), "within": all(r.within for r in rows),
            "variables": sum(r.ge_type == "Variable" for r in rows),
            "hcom": [(r.ge_node, r.ge_type, r.tf_type, r.within, r.isolated is not None) for r in rows
                     if r.ge_type.startswith("Hcom")],
            "first_defect": None if defect is None else [defect.ge_node, defect.ge_type],
            "out": [(r.ge_node, r.ge_type, r.verdict, r.metrics.scale_error, r.tolerance) for r in rows if not r.within]}


def main(ports: list[str], out: str) -> None:
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    strategy = multi_worker_strategy(rank, ports)
    import keras
    import tensorflow as tf

    import graph_ir
    from graph_ir.compare import compare_step
    from graph_ir.distributed import world
    from tests.helpers.models import classification_data, small_model

    with strategy.scope():
        model = small_model()
        optimizer = keras.optimizers.Adam(0.01)
        optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")
    per_replica = 4

    @tf.function
    def step(xb, yb):
        def replica_fn(xb, yb):
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True)) / (2 * per_replica)
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        return strategy.reduce("SUM", strategy.run(replica_fn, args=(xb, yb)), axis=None)

    x, y = classification_data(3, n=4 * per_replica)
    batches = [(x[k * per_replica:(k + 1) * per_replica], y[k * per_replica:(k + 1) * per_replica].astype(np.int64))
               for k in (rank, rank + 2)]
    graph = graph_ir.from_distributed(step, *(tf.constant(a) for a in batches[0]), strategy=strategy)[0]
    session = graph_ir.Session(group=world())
    report = {"lowered": _summary(compare_step(step, *batches[0], graph=graph, session=session))}
    for g in (graph, *graph.subgraphs.values()):
        for node in g.nodes_of_type("HcomAllReduce"):
            node.attrs["reduction"] = "max"
    report["wrong_reduction"] = _summary(compare_step(step, *batches[1], graph=graph, session=session))
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1].split(","), sys.argv[2])
