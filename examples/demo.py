"""Demo: trains a small softmax classifier with PowerSign, on our fused op and on stock tf.raw_ops.

The data set is synthetic (Gaussian clusters made here), so the demo runs offline. Both runs start from the same
weights and see the same batches; the table shows that our op trains exactly as the stock op does, and its speed.
"""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf

import tf_plugin

CLASSES, FEATURES, SAMPLES, EPOCHS, BATCH = 5, 64, 20_000, 5, 256


def make_data(rng: np.random.Generator):
    centers = rng.standard_normal((CLASSES, FEATURES)) * 1.5
    labels = rng.integers(0, CLASSES, SAMPLES)
    x = centers[labels] + rng.standard_normal((SAMPLES, FEATURES)) * 2.0
    return x.astype(np.float32), labels.astype(np.int32)


def train(apply_op, x, y, init):
    w, b = tf.Variable(init[0]), tf.Variable(init[1])
    mw, mb = tf.Variable(tf.zeros_like(w)), tf.Variable(tf.zeros_like(b))

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(yb, xb @ w + b))
        for var, m, g in zip((w, b), (mw, mb), tape.gradient(loss, (w, b))):
            apply_op(var=var.handle, m=m.handle, lr=tf.constant(0.01), logbase=tf.constant(1.0),
                     sign_decay=tf.constant(1.0), beta=tf.constant(0.9), grad=g)
        return loss

    losses, t0 = [], time.perf_counter()
    for epoch in range(EPOCHS):
        epoch_losses = [float(step(x[i:i + BATCH], y[i:i + BATCH])) for i in range(0, SAMPLES, BATCH)]
        losses.append(np.mean(epoch_losses))
        print(f"  epoch {epoch + 1}/{EPOCHS}  loss {losses[-1]:.4f}")
    seconds = time.perf_counter() - t0
    accuracy = float(np.mean(np.argmax(x @ w.numpy() + b.numpy(), axis=1) == y))
    return losses, accuracy, seconds, w.numpy()


def main() -> None:
    rng = np.random.default_rng(0)
    x, y = make_data(rng)
    init = (rng.standard_normal((FEATURES, CLASSES)).astype(np.float32) * 0.01, np.zeros(CLASSES, np.float32))
    rows = []
    for label, op in (("tf_plugin PowerSign", tf_plugin.raw_ops.ResourceApplyPowerSign),
                      ("stock tf.raw_ops PowerSign", tf.raw_ops.ResourceApplyPowerSign)):
        print(label)
        rows.append((label, *train(op, x, y, init)))
    print(f"\n{'optimizer':<28} {'first loss':>10} {'final loss':>10} {'accuracy':>9} {'seconds':>8}")
    for label, losses, acc, sec, _ in rows:
        print(f"{label:<28} {losses[0]:>10.4f} {losses[-1]:>10.4f} {acc:>9.3f} {sec:>8.2f}")
    diff = float(np.max(np.abs(rows[0][4] - rows[1][4])))
    print(f"\nmax |w_ours - w_stock| after training: {diff:.2e}")


if __name__ == "__main__":
    main()
