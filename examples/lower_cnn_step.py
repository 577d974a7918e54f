"""Lowers a small CNN's whole training step (Conv2D, BatchNormalization, pooling, Dense; loss, gradients and
tf_plugin's FusedEmaAdam) to GE IR with graph_ir, saves it as an .air file (what CANN's Graph Engine loads), reads it
back and runs it in graph_ir.Session for a few steps beside TensorFlow on the same random batches. Prints the GE op
counts and, per variable, the largest difference from TensorFlow relative to the variable's scale; exits non-zero if
any exceeds the stated float32 tolerance (1e-5).

    python examples/lower_cnn_step.py [--steps 3] [--out cnn_step.air]
"""

from __future__ import annotations

import argparse
import collections
import sys

import keras
import numpy as np
import tensorflow as tf

import graph_ir
import tf_plugin

TOLERANCE = 1e-5


def build() -> keras.Model:
    keras.utils.set_random_seed(0)
    return keras.Sequential([
        keras.Input((8, 8, 3)),
        keras.layers.Conv2D(8, 3, padding="same", use_bias=False),  # BatchNormalization supplies the bias
        keras.layers.BatchNormalization(),
        keras.layers.Activation("relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(8, 3),
        keras.layers.AveragePooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dense(10),
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", default="cnn_step.air")
    args = parser.parse_args()
    model = build()
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = tf_plugin.optimizers.FusedEmaAdam(1e-2, weight_decay=1e-3)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    rng = np.random.default_rng(1)
    batches = [(rng.standard_normal((16, 8, 8, 3)).astype(np.float32), rng.integers(0, 10, 16).astype(np.int32))
               for _ in range(args.steps + 1)]
    train_step(*batches[0])  # builds the optimizer's state, as the first step of model.fit does
    specs = [tf.TensorSpec((16, 8, 8, 3), tf.float32), tf.TensorSpec((16,), tf.int32)]
    graph = graph_ir.from_tensorflow(train_step, *specs)
    graph.save(args.out)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.load(args.out))
    counts = collections.Counter(n.type for n in graph.nodes.values())
    print(f"{args.out}: {len(graph.nodes)} GE nodes: " + ", ".join(f"{t} {c}" for t, c in sorted(counts.items())))
    for k, (x, y) in enumerate(batches[1:]):
        (ge_loss,) = session.run_graph(0, [x, y])
        print(f"step {k + 1}: loss GE {float(ge_loss):.7f}  TF {float(train_step(x, y)):.7f}")
    worst = 0.0
    print(f"\n{'variable':<44} {'max |GE - TF| / max |TF|':>24}")
    for v in model.variables:
        (got,) = session.get_variables([graph.variable_name(v)])
        want = v.numpy()
        diff = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))
        worst = max(worst, diff)
        print(f"{graph.variable_name(v):<44} {diff:>24.3g}")
    print(f"largest: {worst:.3g} (tolerance {TOLERANCE:g})")
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
