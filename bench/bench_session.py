"""Whole training steps in graph_ir.Session against TensorFlow: forward, loss, gradients and our FusedEmaAdam, each
step lowered with graph_ir.from_tensorflow and run beside the same tf.function in one process, called in alternation
(medians of interleaved rounds; ratios are what to compare, this VM is shared).

Models: VGG16, ResNet50 and MobileNetV2 from keras.applications (weights=None) at 64x64 with batch 8, a residual
CNN with BatchNormalization, a transformer block, and an MLP.

    python -m bench.bench_session [--models mlp,rescnn,...] [--repeats 7] [--plot PATH] [--profile MODEL]
                                  [--ops MODEL] [--blas-threads 1] [--threads N]

Prints per model the second step's and the warm steps' ratio Session / TF, and peak memory: the Session's planned
peak (its planner's bound), its traced peak (tracemalloc over one run_graph: every NumPy buffer), and for both the
growth of the process's peak RSS over one step (VmHWM reset through /proc/self/clear_refs before the step; allocator
caches make it a lower bound, for both alike). Writes bench/results/session.json and a PNG (bench/results/session.png
unless --plot says where). A model whose step does not lower prints "refused: <reason>". --profile MODEL prints
cProfile's top functions of its warm Session runs instead, --ops MODEL its Session time per op type.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import time
import tracemalloc
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf
from keras import layers

import graph_ir
from bench.timing import save_rows, settled_ms
from graph_ir.executors import EXECUTORS, threads
from tf_plugin.optimizers import FusedEmaAdam

CLASSES = 10


def _residual_cnn() -> keras.Model:
    """32x32x3, a stem conv and two residual blocks (conv, BatchNorm, relu, conv, BatchNorm, add), stride-2 stage,
    global average pooling, a dense head."""
    x = inputs = keras.Input((32, 32, 3))
    x = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(32, 3, padding="same", use_bias=False)(x)))
    for filters, stride in ((32, 1), (64, 2)):
        shortcut = x if stride == 1 else layers.Conv2D(filters, 1, stride, use_bias=False)(x)
        y = layers.Conv2D(filters, 3, stride, padding="same", use_bias=False)(x)
        y = layers.ReLU()(layers.BatchNormalization()(y))
        y = layers.BatchNormalization()(layers.Conv2D(filters, 3, padding="same", use_bias=False)(y))
        x = layers.ReLU()(layers.Add()([shortcut, y]))
    return keras.Model(inputs, layers.Dense(CLASSES)(layers.GlobalAveragePooling2D()(x)))


def _transformer() -> keras.Model:
    """One encoder block: embedding (64 wide, 32 tokens), 4-head self-attention, LayerNorms, a 256-wide gelu FFN."""
    tokens = keras.Input((32,), dtype="int32")
    x = layers.Embedding(1000, 64)(tokens)
    x = layers.LayerNormalization()(x + layers.MultiHeadAttention(4, 16)(x, x))
    x = layers.LayerNormalization()(x + layers.Dense(64)(layers.Dense(256, activation="gelu")(x)))
    return keras.Model(tokens, layers.Dense(CLASSES)(layers.GlobalAveragePooling1D()(x)))


def _mlp() -> keras.Model:
    return keras.Sequential([keras.Input((784,)), layers.Dense(256, activation="relu"),
                             layers.Dense(256, activation="relu"), layers.Dense(CLASSES)])


def _application(name: str) -> Callable[[], keras.Model]:
    return lambda: getattr(keras.applications, name)(weights=None, input_shape=(64, 64, 3), classes=CLASSES)


# name -> (model, x spec, whether the model ends in softmax); batch 8 (64 for the MLP)
MODELS: dict[str, tuple[Callable[[], keras.Model], tf.TensorSpec, bool]] = {
    "vgg16": (_application("VGG16"), tf.TensorSpec((8, 64, 64, 3), tf.float32), True),
    "resnet50": (_application("ResNet50"), tf.TensorSpec((8, 64, 64, 3), tf.float32), True),
    "mobilenetv2": (_application("MobileNetV2"), tf.TensorSpec((8, 64, 64, 3), tf.float32), True),
    "rescnn": (_residual_cnn, tf.TensorSpec((8, 32, 32, 3), tf.float32), False),
    "transformer": (_transformer, tf.TensorSpec((8, 32), tf.int32), False),
    "mlp": (_mlp, tf.TensorSpec((64, 784), tf.float32), False),
}


def _step(model: keras.Model, softmax: bool) -> Callable:
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=not softmax)
    optimizer = FusedEmaAdam(1e-3, weight_decay=0.01)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    return step


def _batch(spec: tf.TensorSpec, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    x = (rng.integers(0, 1000, spec.shape).astype(np.int32) if spec.dtype.is_integer
         else rng.standard_normal(spec.shape).astype(np.float32))
    return [x, rng.integers(0, CLASSES, spec.shape[0]).astype(np.int32)]


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _peak_rss_growth(fn: Callable[[], object]) -> float | None:
    """MiB the process's peak RSS grows over one call (None where VmHWM cannot be reset)."""
    if not _reset_peak_rss():
        return None
    before = _rss_kib("VmRSS")
    fn()
    return max(_rss_kib("VmHWM") - before, 0) / 1024


def _traced_peak(fn: Callable[[], object]) -> float:
    """MiB: tracemalloc's peak over one call, above what was held before it."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return (peak - base) / 2**20


def prepare(name: str, blas_threads: int | None = 1,
            threads: int | None = None) -> tuple[Callable, Callable, graph_ir.Session]:
    """(session step, TF step, session) for a model, or raises graph_ir.LoweringError."""
    make, spec, softmax = MODELS[name]
    keras.utils.set_random_seed(0)
    model = make()
    step = _step(model, softmax)
    y_spec = tf.TensorSpec((spec.shape[0],), tf.int32)
    step(*_batch(spec, 0))  # builds the optimizer's state, as fit's first step does
    graph = graph_ir.from_tensorflow(step, spec, y_spec)
    session = graph_ir.Session(blas_threads=blas_threads, threads=threads)
    session.add_graph(0, graph)
    batch = _batch(spec, 1)
    return (lambda: session.run_graph(0, batch)), (lambda: step(*batch).numpy()), session


def bench_model(name: str, repeats: int, blas_threads: int | None = 1, threads: int | None = None) -> dict:
    try:
        ge, tf_step, session = prepare(name, blas_threads, threads)
    except graph_ir.LoweringError as e:
        return {"model": name, "refused": str(e).splitlines()[0][:200]}
    # Each side's second step (TF's first built the optimizer's state before lowering; the Session's first is
    # here), then the warm ones.
    ge()
    second = {"session": _ms(ge), "tf": _ms(tf_step)}
    rounds = settled_ms({"session": ge, "tf": tf_step}, repeats)
    plan = next(iter(session._plans.values())).peak_bytes / 2**20
    return {"model": name, "second_ratio": second["session"] / second["tf"],
            "session_ms": float(np.median(rounds["session"])), "tf_ms": float(np.median(rounds["tf"])),
            "ratio": float(np.median(rounds["session"] / rounds["tf"])),
            "session_plan_mib": plan, "session_traced_mib": _traced_peak(ge),
            "session_rss_mib": _peak_rss_growth(ge), "tf_rss_mib": _peak_rss_growth(tf_step)}


def _ms(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return 1e3 * (time.perf_counter() - t0)


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def print_table(rows: list[dict]) -> None:
    print("| model | Session ms | TF ms | Session/TF (warm, median of rounds) | second step Session/TF | "
          "Session plan MiB | Session traced MiB | Session RSS growth MiB | TF RSS growth MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if "refused" in r:
            print(f"| {r['model']} | refused: {r['refused']} |")
            continue
        print(f"| {r['model']} | {r['session_ms']:.1f} | {r['tf_ms']:.1f} | {r['ratio']:.2f}x | "
              f"{r['second_ratio']:.2f}x | {r['session_plan_mib']:.0f} | {r['session_traced_mib']:.0f} | "
              f"{_mib(r['session_rss_mib'])} | {_mib(r['tf_rss_mib'])} |")


def plot(rows: list[dict], path: str) -> None:
    try:
        import matplotlib
    except ImportError:  # the bench extra is not installed
        print("matplotlib is not installed: no plot")
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if "refused" not in r]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar([r["model"] for r in rows], [r["ratio"] for r in rows], color="tab:blue")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(1.5, color="tab:red", linewidth=0.8, linestyle="--", label="1.5x goal")
    ax.set_ylabel("step time, Session / TF (median)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}")


def profile(name: str, repeats: int, top: int = 30) -> None:
    ge, _, _ = prepare(name)
    ge()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeats):
        ge()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def op_times(name: str, repeats: int, threads: int | None = None, top: int = 20) -> None:
    """Prints the Session's wall time per op type over a warm step of `name` (each executor call timed), beside the
    whole step's and TF's."""
    totals: collections.Counter = collections.Counter()
    calls: collections.Counter = collections.Counter()
    originals = dict(EXECUTORS)

    def timed(op_type: str, run: Callable) -> Callable:
        def call(node, args):
            start = time.perf_counter()
            try:
                return run(node, args)
            finally:
                totals[op_type] += time.perf_counter() - start
                calls[op_type] += 1
        return call

    EXECUTORS.update({op_type: timed(op_type, run) for op_type, run in originals.items()})
    try:
        ge, tf_step, _ = prepare(name, threads=threads)
        ge()
        totals.clear()
        calls.clear()
        step_ms = float(np.median([_ms(ge) for _ in range(repeats)]))
        tf_ms = float(np.median([_ms(tf_step) for _ in range(repeats)]))
    finally:
        EXECUTORS.update(originals)
    print(f"{name}: Session {step_ms:.1f} ms a step (executors {1e3 * sum(totals.values()) / repeats:.1f}), "
          f"TF {tf_ms:.1f} ms")
    print("| op type | ms a step | calls a step |\n| --- | --- | --- |")
    for op_type, seconds in totals.most_common(top):
        print(f"| {op_type} | {1e3 * seconds / repeats:.2f} | {calls[op_type] // repeats} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ", ".join(MODELS))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--plot", default=None, help="the PNG's path (default bench/results/session.png)")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="graph_ir.Session(blas_threads=...) (0: leave NumPy's BLAS as the process has it)")
    parser.add_argument("--threads", type=int, default=0,
                        help="graph_ir.Session(threads=...) (0: every CPU the process may run on)")
    parser.add_argument("--profile", default=None, help="print cProfile's top functions of this model's Session runs")
    parser.add_argument("--ops", default=None, help="print this model's Session time per op type")
    args = parser.parse_args()
    if args.profile:
        profile(args.profile, args.repeats)
        return
    if args.ops:
        op_times(args.ops, args.repeats, args.threads or None)
        return
    rows = []
    for name in args.models.split(","):
        if name not in MODELS:
            parser.error(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
        rows.append(bench_model(name, args.repeats, args.blas_threads or None, args.threads or None))
    print(f"medians of {args.repeats} interleaved rounds; {args.blas_threads or 'default'} BLAS thread(s), "
          f"{args.threads or threads.available()} executor thread(s); load average {os.getloadavg()[0]:.1f}; "
          "memory: the Session's planned peak, its tracemalloc peak, and each side's peak-RSS growth over one step")
    print_table(rows)
    path = save_rows("session", rows)
    plot(rows, args.plot or path.removesuffix(".json") + ".png")


if __name__ == "__main__":
    main()
