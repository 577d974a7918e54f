"""Whole-model optimizer steps: one apply_gradients over a real model's variable set, in a tf.function, with the
candidates called in alternation in one process (medians; ratios are what to compare, this VM is shared).

Candidates: Keras AdamW(use_ema=True), Keras Adam, our FusedEmaAdam (Keras), and the floor: our raw op on one
variable holding the same number of parameters. With torch installed (an optional bench extra, never a package
dependency): torch's AdamW(fused=True) plus a torch._foreach_lerp_ EMA, timed in the same process.

    python -m bench.bench_model_step [--sets resnet50,encoder,500x1024,mlp] [--repeats 10] [--plot PATH]
                                     [--steps-per-call K]
Prints a table and writes bench/results/model_step.json (and a PNG with --plot).
"""

from __future__ import annotations

import argparse
import importlib.util
import math

import keras
import numpy as np
import tensorflow as tf

import tf_plugin
from bench.model_sets import SETS
from bench.timing import median_ms_interleaved, save_rows
from tf_plugin.optimizers import FusedEmaAdam

LR, WD, EMA = 1e-3, 0.01, 0.999


def _keras_candidate(shapes, make_optimizer, steps: int = 1):
    rng = np.random.default_rng(0)
    variables = [keras.Variable(rng.standard_normal(s).astype(np.float32)) for s in shapes]
    grads = [tf.constant(rng.standard_normal(s).astype(np.float32)) for s in shapes]
    optimizer = make_optimizer()
    optimizer.build(variables)

    @tf.function(jit_compile=False)
    def step():
        for _ in range(steps):
            optimizer.apply_gradients(zip(grads, variables))

    return step


def _floor_candidate(count: int, steps: int = 1):
    """Our raw op on one variable of `count` elements: the same parameters without per-variable costs."""
    rng = np.random.default_rng(1)
    init = rng.standard_normal(count).astype(np.float32)
    state = [tf.Variable(x) for x in (init, np.zeros(count, np.float32), np.zeros(count, np.float32), init)]
    grad = tf.constant(rng.standard_normal(count).astype(np.float32))

    @tf.function(jit_compile=False)
    def step():
        for _ in range(steps):
            tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(var=state[0], m=state[1], v=state[2], s=state[3], grad=grad,
                                                        step=3, lr=LR, ema_decay=EMA, weight_decay=WD)

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


def bench_set(name: str, repeats: int, steps: int = 1) -> dict:
    """Median ms per optimizer step of each candidate, `steps` steps per call (one tf.function call, or one Python
    function making `steps` torch steps)."""
    shapes = SETS[name]()
    count = sum(math.prod(s) for s in shapes)
    fns = {
        "keras_adamw_ema": _keras_candidate(shapes, lambda: keras.optimizers.AdamW(LR, weight_decay=WD, use_ema=True,
                                                                                     ema_momentum=EMA), steps),
        "keras_adam": _keras_candidate(shapes, lambda: keras.optimizers.Adam(LR), steps),
        "ours": _keras_candidate(shapes, lambda: FusedEmaAdam(LR, weight_decay=WD, ema_decay=EMA), steps),
        "floor": _floor_candidate(count, steps),
    }
    if importlib.util.find_spec("torch") is not None:
        fns["torch_fused_adamw_ema"] = _torch_candidate(shapes, steps)
    ms = median_ms_interleaved(fns, repeats)
    return {"set": name, "tensors": len(shapes), "parameters": count, "steps_per_call": steps,
            **{f"{k}_ms": v / steps for k, v in ms.items()}}


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
    args = parser.parse_args()
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
