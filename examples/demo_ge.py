"""The demo's Ascend path: the trained model's complete training step (forward pass, loss, gradients and optimizer)
lowered to GE IR with graph_ir as one graph, saved as an .air file (what CANN's Graph Engine loads), read back and
run in graph_ir.Session for a few steps beside TensorFlow on the same real batches. Prints the largest difference
over every weight, slot and counter, relative to each tensor's own scale, and over the returned loss."""

from __future__ import annotations

import os

import keras
import numpy as np
import tensorflow as tf

import graph_ir


def lower_and_run(name: str, model: keras.Model, optimizer, x: np.ndarray, y: np.ndarray, folder: str,
                  steps: int = 5, batch_size: int = 32) -> dict:
    variables = model.trainable_variables
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(x_batch, y_batch):
        with tf.GradientTape() as tape:
            loss = loss_fn(y_batch, model(x_batch, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    specs = [tf.TensorSpec((batch_size, *x.shape[1:]), tf.float32), tf.TensorSpec((batch_size,), tf.int32)]
    graph = graph_ir.from_tensorflow(train_step, *specs)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name.replace(' ', '_').replace('(', '').replace(')', '')}.air")
    graph.save(path)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.load(path))
    state = [v for v in (*variables, *optimizer.variables) if _captured(graph, v)]
    loss_diff = 0.0
    for k in range(steps):
        rows = slice(k * batch_size, (k + 1) * batch_size)
        (got_loss,) = session.run_graph(0, [x[rows], y[rows]])
        want_loss = float(train_step(x[rows], y[rows]))
        loss_diff = max(loss_diff, abs(float(got_loss) - want_loss) / abs(want_loss))
    names = [graph.variable_name(v) for v in state]
    worst = 0.0
    for got, var in zip(session.get_variables(names), state):
        want = np.asarray(var.numpy(), np.float64)
        worst = max(worst, float(np.max(np.abs(got - want), initial=0.0) / max(np.max(np.abs(want), initial=0.0),
                                                                                 1e-30)))
    counts = {}
    for node in graph.nodes.values():
        counts[node.type] = counts.get(node.type, 0) + 1
    return {"name": name, "path": path, "bytes": os.path.getsize(path), "nodes": len(graph.nodes),
            "updates": counts.get("InplaceApplyPowerSign", 0) + counts.get("ApplyFusedEmaAdam", 0),
            "variables": len(names), "steps": steps, "max_rel_diff": worst, "loss_diff": loss_diff}


def _captured(graph: graph_ir.Graph, variable) -> bool:
    try:
        graph.variable_name(variable)
    except KeyError:
        return False
    return True


def print_ge_table(rows: list[dict]) -> None:
    header = (f"{'optimizer':<28} {'GE nodes':>8} {'updates':>7} {'Variables':>9} {'.air bytes':>10} {'steps':>5} "
              f"{'max diff vs TF':>14} {'loss diff':>9}")
    print("\nThe whole training step on the Ascend path (forward, loss, gradients, optimizer: lowered as one graph, "
          "saved as .air, reloaded, run in the GE session on the same batches; differences relative to each "
          "tensor's scale)")
    print(header + "\n" + "-" * len(header))
    for r in rows:
        print(f"{r['name']:<28} {r['nodes']:>8} {r['updates']:>7} {r['variables']:>9} {r['bytes']:>10} "
              f"{r['steps']:>5} {r['max_rel_diff']:>14.3g} {r['loss_diff']:>9.3g}")
    print(f"files: {', '.join(r['path'] for r in rows)}")
