"""Times ResourceApplyFusedEmaAdam against the same AdamW+EMA update composed from stock TF, and Keras 3 AdamW(use_ema).

Three candidates, called in alternation in one process:
- ours: one tf_plugin ResourceApplyFusedEmaAdam (mode 1, AdamW);
- stock: AdamW decay (var -= lr*wd*var) + tf.raw_ops.ResourceApplyAdam + EMA assign, in one tf.function;
- keras: keras.optimizers.AdamW(use_ema=True, ema_momentum=ema).apply_gradients in a tf.function.
Prints a table (median ms, speedup of ours, GB/s of ours' 9 memory streams) and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse

import keras
import numpy as np
import tensorflow as tf

import tf_plugin
from bench.timing import median_ms_interleaved, save_rows

LR, WD, BETA1, BETA2, EPS, EMA = 1e-3, 0.01, 0.9, 0.999, 1e-8, 0.999


def candidates(size: int, dtype: tf.DType, calls: int = 1) -> dict:
    """{"ours": fn} and, for float32, "stock" and "keras": tf.functions of one AdamW+EMA step each. Ours makes
    `calls` steps in sequence (`calls` > 1 only for timing the op without the cost of calling a tf.function)."""
    rng = np.random.default_rng(0)
    init = rng.standard_normal(size).astype(np.float32)
    grad = tf.constant(tf.cast(rng.standard_normal(size), dtype))
    zeros = np.zeros(size, np.float32)

    ours = [tf.Variable(tf.cast(x, dtype)) for x in (init, zeros, zeros, init)]
    step = tf.Variable(1, dtype=tf.int64)

    @tf.function(jit_compile=False)
    def fused():
        for _ in range(calls):
            tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(var=ours[0], m=ours[1], v=ours[2], s=ours[3], grad=grad,
                                                        step=step, lr=LR, ema_decay=EMA, beta1=BETA1, beta2=BETA2,
                                                        eps=EPS, mode=1, weight_decay=WD)
            step.assign_add(1)

    result = {"ours": fused}
    if dtype != tf.float32 or calls > 1:
        return result

    stock = [tf.Variable(x) for x in (init, zeros, zeros, init)]
    stock_step = tf.Variable(1.0)

    @tf.function(jit_compile=False)
    def composed():
        var, m, v, s = stock
        var.assign_sub(LR * WD * var)  # AdamW's decoupled decay, from the old var
        b1p, b2p = BETA1**stock_step, BETA2**stock_step
        tf.raw_ops.ResourceApplyAdam(var=var.handle, m=m.handle, v=v.handle, beta1_power=b1p, beta2_power=b2p, lr=LR,
                                     beta1=BETA1, beta2=BETA2, epsilon=EPS * tf.sqrt(1 - b2p), grad=grad)
        s.assign(EMA * s + (1 - EMA) * var)
        stock_step.assign_add(1.0)

    kvar = tf.Variable(init)
    opt = keras.optimizers.AdamW(learning_rate=LR, weight_decay=WD, beta_1=BETA1, beta_2=BETA2, epsilon=EPS,
                                 use_ema=True, ema_momentum=EMA)
    opt.build([kvar])

    @tf.function(jit_compile=False)
    def keras_step():
        opt.apply_gradients([(grad, kvar)])

    return {**result, "stock": composed, "keras": keras_step}


def bench(size: int, dtype: tf.DType, repeats: int) -> dict:
    ms = median_ms_interleaved(candidates(size, dtype), repeats)
    row = {"dtype": dtype.name, "size": size, **ms, "ours_gb_s": 9 * size * dtype.size / ms["ours"] / 1e6}
    for other in ("stock", "keras"):
        if other in ms:
            row[f"vs_{other}"] = ms[other] / ms["ours"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    rows = [bench(args.size, dt, args.repeats) for dt in (tf.float32, tf.float16, tf.bfloat16)]
    print(f"FusedEmaAdam (AdamW + EMA), {args.size} elements, median of {args.repeats} alternating calls")
    print(f"{'dtype':<9} {'ours ms':>8} {'stock ms':>9} {'keras ms':>9} {'vs stock':>9} {'vs keras':>9} {'GB/s':>6}")
    for r in rows:
        stock = f"{r['stock']:>9.2f}" if "stock" in r else f"{'-':>9}"
        keras_ms = f"{r['keras']:>9.2f}" if "keras" in r else f"{'-':>9}"
        vs_s = f"{r['vs_stock']:>8.2f}x" if "vs_stock" in r else f"{'-':>9}"
        vs_k = f"{r['vs_keras']:>8.2f}x" if "vs_keras" in r else f"{'-':>9}"
        print(f"{r['dtype']:<9} {r['ours']:>8.2f} {stock} {keras_ms} {vs_s} {vs_k} {r['ours_gb_s']:>6.1f}")
    save_rows(f"fused_ema_adam_{args.size}", rows)

if __name__ == "__main__":
    main()
