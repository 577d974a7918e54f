"""Keras LSTM and GRU training steps (Keras's rnn loop: a While whose body reads its input from a TensorList and
pushes the intermediates its gradient pops) in graph_ir.Session, warm run_graph medians, and the same in another
checkout of this repository for a side-by-side comparison (the runs alternate between the two trees, each in its
own process; ratios are what to compare, this VM is shared).

    python -m bench.bench_rnn_steps [--sizes 5x6x4x5,32x50x16x64] [--repeats 9] [--against DIR]

--sizes lists batch x time steps x features x units. --against DIR runs the same in DIR (a checkout with its built
extension, e.g. `git worktree add` of the base commit) and prints both and the ratio this tree / DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

RNNS = ("lstm", "gru")


def _measure(rnn: str, size: str, repeats: int) -> float:
    """The median ms of a warm run_graph of one training step, in this process's tree."""
    import keras
    import numpy as np
    import tensorflow as tf
    from keras import layers

    import graph_ir
    from bench.bench_session import _step

    batch, steps, features, units = (int(v) for v in size.split("x"))
    keras.utils.set_random_seed(1)
    layer = layers.LSTM(units) if rnn == "lstm" else layers.GRU(units)
    step = _step(keras.Sequential([keras.Input((steps, features)), layer, layers.Dense(3)]), softmax=False)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((batch, steps, features)).astype(np.float32)
    y = rng.integers(0, 3, batch).astype(np.int32)
    step(x, y)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.from_tensorflow(step, tf.TensorSpec(x.shape, tf.float32),
                                                  tf.TensorSpec(y.shape, tf.int32)))
    session.run_graph(0, [x, y])
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        session.run_graph(0, [x, y])
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))


def _in_tree(tree: str, rnn: str, size: str, repeats: int) -> float:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=tree)
    code = f"from bench.bench_rnn_steps import _measure; print(_measure({rnn!r}, {size!r}, {repeats}))"
    here = os.path.join(tree, "bench", "bench_rnn_steps.py")
    if not os.path.exists(here):  # a tree without this bench: run this file's _measure with that tree's graph_ir
        code = (f"import importlib.util as u; s = u.spec_from_file_location('b', {__file__!r}); m = "
                f"u.module_from_spec(s); s.loader.exec_module(m); print(m._measure({rnn!r}, {size!r}, {repeats}))")
    result = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True,
                            check=True)
    return float(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5x6x4x5,32x50x16x64")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=3, help="alternating processes per tree")
    parser.add_argument("--against", default=None)
    args = parser.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = [here] + ([os.path.abspath(args.against)] if args.against else [])
    rows = []
    for rnn in RNNS:
        for size in args.sizes.split(","):
            ms = {tree: [] for tree in trees}
            for _ in range(args.rounds):
                for tree in trees:
                    ms[tree].append(_in_tree(tree, rnn, size, args.repeats))
            best = [min(ms[tree]) for tree in trees]
            row = {"rnn": rnn, "size": size, "ms": best}
            if len(best) == 2:
                row["ratio"] = best[0] / best[1]
            rows.append(row)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
