"""Whole-model optimizer steps: one apply_gradients over a real model's variable set, in a tf.function, with the
candidates called in alternation in one process (medians; ratios are what to compare, this VM is shared).

Candidates: Keras AdamW(use_ema=True), Keras Adam, our FusedEmaAdam (Keras), and the floor: our raw op on one
variable holding the same number of parameters. With torch installed (an optional bench extra, never a package
dependency): torch's AdamW(fused=True) plus a torch._foreach_lerp_ EMA, timed in the same process.

    python -m bench.bench_model_step [--sets resnet50,encoder,500x1024,mlp] [--repeats 10] [--plot PATH]
                                     [--steps-per-call K] [--split]
Prints a table and writes bench/results/model_step.json (and a PNG with --plot). With --split it prints instead,
for Keras AdamW(use_ema), ours and the floor, how much of each call is the step inside the graph (between two
tf.timestamp ops) and how much the call around it, with the number of inputs the call captures
(bench/results/model_step_split.json).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

import tf_plugin
from bench.model_sets import SETS
from bench.timing import median_ms_interleaved, save_rows, settled_calls
from tf_plugin.optimizers import FusedEmaAdam

LR, WD, EMA = 1e-3, 0.01, 0.999


def _keras_body(shapes, make_optimizer) -> Callable[[], None]:
    """One Keras apply_gradients over fresh variables of `shapes` and fixed (captured) gradients."""
    rng = np.random.default_rng(0)
    variables = [keras.Variable(rng.standard_normal(s).astype(np.float32)) for s in shapes]
    grads = [tf.constant(rng.standard_normal(s).astype(np.float32)) for s in shapes]
    optimizer = make_optimizer()
    optimizer.build(variables)
    return lambda: optimizer.apply_gradients(zip(grads, variables))


def _floor_body(count: int) -> Callable[[], None]:
    """Our raw op on one variable of `count` elements: the same parameters without per-variable costs."""
    rng = np.random.default_rng(1)
    init = rng.standard_normal(count).astype(np.float32)
    state = [tf.Variable(x) for x in (init, np.zeros(count, np.float32), np.zeros(count, np.float32), init)]
    grad = tf.constant(rng.standard_normal(count).astype(np.float32))
    return lambda: tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(var=state[0], m=state[1], v=state[2], s=state[3],
                                                               grad=grad, step=3, lr=LR, ema_decay=EMA,
                                                               weight_decay=WD)


def _step_function(body: Callable[[], None], steps: int = 1):
    @tf.function(jit_compile=False)
    def step():
        for _ in range(steps):
            body()

    return step


def _bracketed_function(body: Callable[[], None]):
    """The step between two tf.timestamp ops: the call returns when the step started and ended inside the graph."""

    @tf.function(jit_compile=False)
    def step():
        graph = tf.compat.v1.get_default_graph()
        start = tf.timestamp()
        before = len(graph.get_operations())
        with tf.control_dependencies([start]):
            body()
        with tf.control_dependencies(graph.get_operations()[before:]):
            return start, tf.timestamp()

    return step


def _torch_candidate(shapes, steps: int = 1):
    import torch

    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    for p in params:
        p.grad = torch.randn(p.shape)
    averages = [p.detach().clone() for p in params]
    optimizer = torch.optim.AdamW(params, lr=LR, weight_decay=WD, fused=True)

    def step():
        for _ in range(steps):
            optimizer.step()
            with torch.no_grad():
                torch._foreach_lerp_(averages, [p.detach() for p in params], 1 - EMA)

    return step


def _bodies(shapes, count: int, with_adam: bool) -> dict[str, Callable[[], None]]:
    bodies = {"keras_adamw_ema": _keras_body(shapes, lambda: keras.optimizers.AdamW(LR, weight_decay=WD, use_ema=True,
                                                                                    ema_momentum=EMA))}
    if with_adam:
        bodies["keras_adam"] = _keras_body(shapes, lambda: keras.optimizers.Adam(LR))
    bodies["ours"] = _keras_body(shapes, lambda: FusedEmaAdam(LR, weight_decay=WD, ema_decay=EMA))
    bodies["floor"] = _floor_body(count)
    return bodies


def bench_set(name: str, repeats: int, steps: int = 1) -> dict:
    """Median ms per optimizer step of each candidate, `steps` steps per call (one tf.function call, or one Python
    function making `steps` torch steps)."""
    shapes = SETS[name]()
    count = sum(math.prod(s) for s in shapes)
    fns = {key: _step_function(body, steps) for key, body in _bodies(shapes, count, with_adam=True).items()}
    if importlib.util.find_spec("torch") is not None:
        fns["torch_fused_adamw_ema"] = _torch_candidate(shapes, steps)
    ms = median_ms_interleaved(fns, repeats)
    return {"set": name, "tensors": len(shapes), "parameters": count, "steps_per_call": steps,
            **{f"{k}_ms": v / steps for k, v in ms.items()}}


def split_set(name: str, repeats: int) -> list[dict]:
    """Where each candidate's call time goes: the step inside the graph (between two tf.timestamp ops) and the rest
    (moving the captured inputs into the call, starting it, returning), medians over rounds in random order."""
    shapes = SETS[name]()
    fns = {key: _bracketed_function(body)
           for key, body in _bodies(shapes, sum(math.prod(s) for s in shapes), with_adam=False).items()}
    rows = []
    for key, (call_ms, stamps) in settled_calls(fns, repeats, settle_s=0.0).items():
        inside_ms = np.asarray([1e3 * float(end - start) for start, end in stamps])
        captured = len(fns[key].get_concrete_function().captured_inputs)
        rows.append({"set": name, "candidate": key, "captured_inputs": captured, "call_ms": float(np.median(call_ms)),
                     "in_graph_ms": float(np.median(inside_ms)), "outside_ms": float(np.median(call_ms - inside_ms))})
    return rows


def print_split(rows: list[dict]) -> None:
    print("| set | candidate | captured inputs | call ms | step in the graph ms | rest of the call ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['set']} | {r['candidate']} | {r['captured_inputs']} | {r['call_ms']:.2f} | "
              f"{r['in_graph_ms']:.2f} | {r['outside_ms']:.2f} |")


def print_table(rows: list[dict]) -> None:
    print("| set | tensors | parameters | Keras AdamW(use_ema) ms | Keras Adam ms | ours ms | floor ms | "
          "Keras/ours | ours/floor | torch fused+EMA ms | ours vs torch |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        torch_ms = r.get("torch_fused_adamw_ema_ms")
        torch_cells = (f"{torch_ms:.2f} | {torch_ms / r['ours_ms']:.2f}x" if torch_ms else "- | -")
        print(f"| {r['set']} | {r['tensors']} | {r['parameters']:,} | {r['keras_adamw_ema_ms']:.2f} | "
              f"{r['keras_adam_ms']:.2f} | {r['ours_ms']:.2f} | {r['floor_ms']:.2f} | "
              f"{r['keras_adamw_ema_ms'] / r['ours_ms']:.2f}x | {r['ours_ms'] / r['floor_ms']:.2f}x | {torch_cells} |")


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in ("keras_adamw_ema_ms", "keras_adam_ms", "ours_ms", "floor_ms", "torch_fused_adamw_ema_ms")
            if all(k in r for r in rows)]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(keys)
    for k, key in enumerate(keys):
        ax.bar(np.arange(len(rows)) + k * width, [r[key] for r in rows], width, label=key.removesuffix("_ms"))
    ax.set_xticks(np.arange(len(rows)) + 0.4 - width / 2, [r["set"] for r in rows])
    ax.set_yscale("log")
    ax.set_ylabel("ms per optimizer step (median)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated: " + ", ".join(SETS))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--plot", default=None, help="write a PNG bar chart here")
    parser.add_argument("--steps-per-call", type=int, default=1,
                        help="optimizer steps per tf.function call, as Keras's steps_per_execution (1: the issue's "
                             "definition; more spreads the 0.3-0.7 ms of calling a tf.function over the steps)")
    parser.add_argument("--split", action="store_true",
                        help="instead of the table: each candidate's step inside the graph against the rest of its "
                             "tf.function call")
    args = parser.parse_args()
    if args.split:
        rows = [r for name in args.sets.split(",") for r in split_set(name, args.repeats)]
        print_split(rows)
        save_rows("model_step_split", rows)
        return
    rows = [bench_set(name, args.repeats, args.steps_per_call) for name in args.sets.split(",")]
    print(f"{tf.config.threading.get_intra_op_parallelism_threads() or 'default'} intra-op threads; medians of "
          f"{args.repeats} calls in random order, {args.steps_per_call} step(s) per call; kernels' ISA path: "
          f"{tf_plugin.isa()}")
    print_table(rows)
    save_rows("model_step" if args.steps_per_call == 1 else f"model_step_{args.steps_per_call}_per_call", rows)
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
