"""What a template graph (dims known only at run time, graph_ir/dynamic) costs against the same step lowered with
static shapes: the same training step (forward, loss, gradients, FusedEmaAdam) of each model is lowered twice, once
from static specs and once with a None batch (and, for the transformer, a None length), and warm run_graph calls of
both run at the same shapes, interleaved (medians of rounds; the ratio dynamic/static is the median of each round's
ratio, which a slow moment of this shared VM hits alike). The goal: within 5%.

Also the first call at a shape the template has not seen: its instantiate + plan time alone, and the whole first
call against a warm call at that shape (medians over three new batch sizes, from the shape in the table down).

    python -m bench.bench_dynamic [--models mlp,rescnn,transformer] [--repeats 50]

Prints a table and writes bench/results/dynamic.json.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf
from keras import layers

import graph_ir
from bench.bench_session import CLASSES, _mlp, _residual_cnn, _step
from bench.timing import save_rows, settled_ms
from graph_ir.dynamic import instantiate
from graph_ir.executors import threads
from graph_ir.runtime.planner import plan


def _transformer() -> keras.Model:
    """bench_session's transformer block (embedding 64 wide, 4-head self-attention, LayerNorms, a 256-wide gelu FFN)
    with a token length left open, so that one model serves both lowerings."""
    tokens = keras.Input((None,), dtype="int32")
    x = layers.Embedding(1000, 64)(tokens)
    x = layers.LayerNormalization()(x + layers.MultiHeadAttention(4, 16)(x, x))
    x = layers.LayerNormalization()(x + layers.Dense(64)(layers.Dense(256, activation="gelu")(x)))
    return keras.Model(tokens, layers.Dense(CLASSES)(layers.GlobalAveragePooling1D()(x)))


# name -> (model, static x spec, dynamic x spec, x shape of a first call at a new shape)
MODELS: dict[str, tuple[Callable[[], keras.Model], tf.TensorSpec, tf.TensorSpec, tuple[int, ...]]] = {
    "mlp": (_mlp, tf.TensorSpec((64, 784), tf.float32), tf.TensorSpec((None, 784), tf.float32), (40, 784)),
    "rescnn": (_residual_cnn, tf.TensorSpec((8, 32, 32, 3), tf.float32),
               tf.TensorSpec((None, 32, 32, 3), tf.float32), (5, 32, 32, 3)),
    "transformer": (_transformer, tf.TensorSpec((8, 32), tf.int32), tf.TensorSpec((None, None), tf.int32),
                    (6, 24)),
}


def _batch(shape: tuple[int, ...], dtype: tf.DType, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    x = (rng.integers(0, 1000, shape).astype(np.int32) if dtype.is_integer
         else rng.standard_normal(shape).astype(np.float32))
    return [x, rng.integers(0, CLASSES, shape[0]).astype(np.int32)]


def _ms(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return 1e3 * (time.perf_counter() - t0)


def _session(graph: graph_ir.Graph, blas_threads: int | None) -> graph_ir.Session:
    session = graph_ir.Session(blas_threads=blas_threads)
    session.add_graph(0, graph)
    return session


def _new_shapes(session: graph_ir.Session, dtype: tf.DType, new_shape: tuple[int, ...],
                repeats: int) -> tuple[float, float, float]:
    """(instantiate + plan ms, first call ms, warm call ms) at three batch sizes the template has not seen
    (medians over the three)."""
    template = session._plans[0].template
    setup, first, warm = [], [], []
    for k in range(3):
        batch = _batch((new_shape[0] - k, *new_shape[1:]), dtype, 2 + k)
        shapes = [tuple(a.shape) for a in batch]
        setup.append(_ms(lambda shapes=shapes: plan(instantiate(template, shapes), None)))
        run = (lambda batch=batch: session.run_graph(0, batch))
        first.append(_ms(run))
        warm.append(float(np.median([_ms(run) for _ in range(max(3, repeats // 5))])))
    return float(np.median(setup)), float(np.median(first)), float(np.median(warm))


def bench_model(name: str, repeats: int, blas_threads: int | None = 1) -> dict:
    make, static_spec, dynamic_spec, new_shape = MODELS[name]
    keras.utils.set_random_seed(0)
    model = make()
    step = _step(model, softmax=False)
    shape = tuple(static_spec.shape.as_list())
    batch = _batch(shape, static_spec.dtype, 1)
    step(*batch)  # builds the optimizer's state, as fit's first step does
    try:
        t0 = time.perf_counter()
        static = graph_ir.from_tensorflow(step, static_spec, tf.TensorSpec((shape[0],), tf.int32))
        t1 = time.perf_counter()
        dynamic = graph_ir.from_tensorflow(step, dynamic_spec, tf.TensorSpec((None,), tf.int32))
        t2 = time.perf_counter()
    except graph_ir.LoweringError as e:
        return {"model": name, "refused": str(e).splitlines()[0][:200]}
    sessions = {"static": _session(static, blas_threads), "dynamic": _session(dynamic, blas_threads)}
    rounds = settled_ms({k: (lambda s=s: s.run_graph(0, batch)) for k, s in sessions.items()}, repeats)
    instance = instantiate(dynamic, [tuple(a.shape) for a in batch])
    setup, first, warm = _new_shapes(sessions["dynamic"], static_spec.dtype, new_shape, repeats)
    return {"model": name, "shape": list(shape), "new_shape": list(new_shape),
            "static_ms": float(np.median(rounds["static"])), "dynamic_ms": float(np.median(rounds["dynamic"])),
            "ratio": float(np.median(rounds["dynamic"] / rounds["static"])),
            "lower_static_s": t1 - t0, "lower_dynamic_s": t2 - t1,
            "nodes_static": len(static.nodes), "nodes_instance": len(instance.nodes),
            "setup_ms": setup, "first_ms": first, "warm_new_ms": warm, "first_vs_warm": first / warm}


def print_table(rows: list[dict]) -> None:
    print("| model | shape | static ms | dynamic ms | dynamic/static (median of rounds) | lowering s static / "
          "dynamic | nodes static / instance | new shape | instantiate+plan ms | first call ms | warm call ms | "
          "first/warm |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if "refused" in r:
            print(f"| {r['model']} | refused: {r['refused']} |")
            continue
        print(f"| {r['model']} | {r['shape']} | {r['static_ms']:.1f} | {r['dynamic_ms']:.1f} | {r['ratio']:.3f}x | "
              f"{r['lower_static_s']:.1f} / {r['lower_dynamic_s']:.1f} | {r['nodes_static']} / "
              f"{r['nodes_instance']} | {r['new_shape']} | {r['setup_ms']:.0f} | {r['first_ms']:.0f} | "
              f"{r['warm_new_ms']:.1f} | {r['first_vs_warm']:.1f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ", ".join(MODELS))
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="graph_ir.Session(blas_threads=...) (0: leave NumPy's BLAS as the process has it)")
    args = parser.parse_args()
    rows = []
    for name in args.models.split(","):
        if name not in MODELS:
            parser.error(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
        rows.append(bench_model(name, args.repeats, args.blas_threads or None))
    print(f"medians of {args.repeats} interleaved rounds; {args.blas_threads or 'default'} BLAS thread(s), "
          f"{threads.available()} executor thread(s); load average {os.getloadavg()[0]:.1f}")
    print_table(rows)
    print(f"wrote {save_rows('dynamic', rows)}")


if __name__ == "__main__":
    main()
