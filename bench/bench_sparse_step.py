"""Sparse optimizer steps (an Embedding's IndexedSlices gradient) in graph_ir.Session against TensorFlow: the same
step lowered with graph_ir.from_tensorflow and run beside the tf.function in one process, called in alternation
(medians of interleaved rounds; this VM is shared, so the ratios are what to compare).

The model: an Embedding of VOCAB rows × 64 (a batch of 32 sequences of 20 tokens touches at most 640 of them), mean
pooling, a Dense head. RMSprop's and Adagrad's sparse paths hold Keras's tf.cond around a Where, so the Session runs
them part by part (graph_ir/runtime/segments.py); SGD's writes rows (ScatterSub) without a Where; Adam densifies.

    python -m bench.bench_sparse_step [--optimizers rmsprop,adagrad,sgd,adam] [--vocab 20000] [--repeats 20]

Prints per optimizer the warm steps' Session and TF milliseconds and their ratio, and the parts of the Session's
run; writes bench/results/sparse_step.json.
"""

from __future__ import annotations

import argparse

import keras
import numpy as np
import tensorflow as tf
from keras import layers

import graph_ir
from bench.timing import save_rows, settled_ms
from graph_ir.runtime.segments import PartedGraph

OPTIMIZERS = {"rmsprop": lambda: keras.optimizers.RMSprop(1e-3), "adagrad": lambda: keras.optimizers.Adagrad(0.05),
              "sgd": lambda: keras.optimizers.SGD(0.05), "adam": lambda: keras.optimizers.Adam(1e-3)}
BATCH, TOKENS, WIDTH = 32, 20, 64


def _step(name: str, vocab: int):
    keras.utils.set_random_seed(1)
    tokens = keras.Input((TOKENS,), dtype="int32")
    x = layers.GlobalAveragePooling1D()(layers.Embedding(vocab, WIDTH)(tokens))
    model = keras.Model(tokens, layers.Dense(10)(x))
    optimizer, loss_fn = OPTIMIZERS[name](), keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    return step


def run(names: list[str], vocab: int, repeats: int) -> list[dict]:
    rng = np.random.default_rng(0)
    x = rng.integers(0, vocab, (BATCH, TOKENS)).astype(np.int32)
    y = rng.integers(0, 10, BATCH).astype(np.int32)
    specs = [tf.TensorSpec(x.shape, tf.int32), tf.TensorSpec(y.shape, tf.int32)]
    rows = []
    for name in names:
        step = _step(name, vocab)
        step(x, y)
        session = graph_ir.Session()
        session.add_graph(0, graph_ir.from_tensorflow(step, *specs))
        session.run_graph(0, [x, y])
        times = settled_ms({"session": lambda s=session: s.run_graph(0, [x, y]), "tf": lambda f=step: f(x, y)},
                           repeats)
        entry = session._plans[0]
        parts = sum(1 for p in entry.parts if p) if isinstance(entry, PartedGraph) else 1
        ratio = float(np.median(times["session"] / times["tf"]))
        rows.append({"optimizer": name, "vocab": vocab, "session_ms": float(np.median(times["session"])),
                     "tf_ms": float(np.median(times["tf"])), "ratio": ratio, "parts": parts})
        print(f"{name:8s} vocab {vocab}: Session {rows[-1]['session_ms']:.2f} ms, TF {rows[-1]['tf_ms']:.2f} ms, "
              f"Session/TF {ratio:.2f}x, {parts} part(s)", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--optimizers", default=",".join(OPTIMIZERS))
    parser.add_argument("--vocab", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    save_rows("sparse_step", run(args.optimizers.split(","), args.vocab, args.repeats))


if __name__ == "__main__":
    main()
