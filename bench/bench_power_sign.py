"""Times tf_plugin's ResourceApplyPowerSign against stock tf.raw_ops side by side, in one process.

Prints a table (median ms per call inside a tf.function, speedup, GB/s of the 5 memory streams) and writes it as
JSON to bench/results/. Absolute times drift on a shared machine; compare the ratios measured in one run.
"""

from __future__ import annotations

import argparse

import numpy as np
import tensorflow as tf

import tf_plugin
from bench.timing import median_ms_interleaved, save_rows


def candidates(size: int, dtype: tf.DType, calls: int = 1) -> dict:
    """{"stock": fn, "ours": fn}: each a tf.function making `calls` ResourceApplyPowerSign calls (in sequence, on the
    same variables) on their own variables."""
    rng = np.random.default_rng(0)
    grad = tf.cast(rng.standard_normal(size), dtype)
    scalars = {k: tf.constant(v, dtype) for k, v in {"lr": 1e-3, "logbase": 1.0, "sign_decay": 0.5, "beta": 0.9}.items()}
    fns = {}
    for label, op in (("stock", tf.raw_ops.ResourceApplyPowerSign), ("ours", tf_plugin.raw_ops.ResourceApplyPowerSign)):
        var = tf.Variable(tf.cast(rng.standard_normal(size), dtype))
        m = tf.Variable(tf.cast(rng.standard_normal(size), dtype))

        def call(op=op, var=var, m=m) -> None:
            for _ in range(calls):  # resource updates in a tf.function run in program order
                op(var=var.handle, m=m.handle, grad=grad, **scalars)

        fns[label] = tf.function(call)
    return fns


def bench(dtype: tf.DType, size: int, repeats: int) -> dict:
    result = median_ms_interleaved(candidates(size, dtype), repeats)
    bytes_moved = 5 * size * dtype.size  # read var, m, grad; write var, m
    return {"dtype": dtype.name, "size": size, **result, "speedup": result["stock"] / result["ours"],
            "ours_gb_s": bytes_moved / result["ours"] / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    rows = [bench(dt, args.size, args.repeats) for dt in (tf.float32, tf.float16, tf.bfloat16)]
    print(f"ResourceApplyPowerSign, {args.size} elements, median of {args.repeats} alternating calls")
    print(f"{'dtype':<9} {'stock ms':>9} {'ours ms':>9} {'speedup':>8} {'ours GB/s':>10}")
    for r in rows:
        print(f"{r['dtype']:<9} {r['stock']:>9.2f} {r['ours']:>9.2f} {r['speedup']:>7.2f}x {r['ours_gb_s']:>10.1f}")
    save_rows(f"power_sign_{args.size}", rows)

if __name__ == "__main__":
    main()
