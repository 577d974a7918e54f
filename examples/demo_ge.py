"""The demo's Ascend path: the trained model's optimizer step, lowered to GE IR with graph_ir, saved as an .air
file (what CANN's Graph Engine loads), read back and run in graph_ir.Session for a few steps beside TensorFlow,
fed the same gradients (computed by TF on real batches). Prints the largest difference over every variable, slot
and counter."""

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
    def apply(*grads):
        optimizer.apply_gradients(zip(grads, variables))

    specs = [tf.TensorSpec(v.shape, v.dtype) for v in variables]
    graph = graph_ir.from_tensorflow(apply, *specs)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name.replace(' ', '_').replace('(', '').replace(')', '')}.air")
    graph.save(path)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.load(path))
    state = [v for v in (*variables, *optimizer.variables) if _captured(graph, v)]
    for k in range(steps):
        rows = slice(k * batch_size, (k + 1) * batch_size)
        with tf.GradientTape() as tape:
            loss = loss_fn(y[rows], model(x[rows], training=True))
        grads = [g.numpy() for g in tape.gradient(loss, variables)]
        session.run_graph(0, grads)
        apply(*grads)
    names = [graph.variable_name(v) for v in state]
    worst = 0.0
    for got, var in zip(session.get_variables(names), state):
        want = np.asarray(var.numpy(), np.float64)
        worst = max(worst, float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-30), initial=0.0)))
    counts = {}
    for node in graph.nodes.values():
        counts[node.type] = counts.get(node.type, 0) + 1
    return {"name": name, "path": path, "bytes": os.path.getsize(path), "nodes": len(graph.nodes),
            "updates": counts.get("InplaceApplyPowerSign", 0) + counts.get("ApplyFusedEmaAdam", 0),
            "variables": len(names), "steps": steps, "max_rel_diff": worst}


def _captured(graph: graph_ir.Graph, variable) -> bool:
    try:
        graph.variable_name(variable)
    except KeyError:
        return False
    return True


def print_ge_table(rows: list[dict]) -> None:
    header = (f"{'optimizer':<28} {'GE nodes':>8} {'updates':>7} {'Variables':>9} {'.air bytes':>10} {'steps':>5} "
              f"{'max rel diff vs TF':>18}")
    print("\nThe optimizer step on the Ascend path (graph_ir: lowered, saved as .air, reloaded, run in the GE session)")
    print(header + "\n" + "-" * len(header))
    for r in rows:
        print(f"{r['name']:<28} {r['nodes']:>8} {r['updates']:>7} {r['variables']:>9} {r['bytes']:>10} "
              f"{r['steps']:>5} {r['max_rel_diff']:>18.3g}")
    print(f"files: {', '.join(r['path'] for r in rows)}")
