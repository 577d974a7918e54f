"""Demo: trains a small MLP on a real data set with stock Keras optimizers and with tf_plugin's.

The data set is scikit-learn's bundled copy of the UCI handwritten digits (1,797 8x8 images, 10 classes), so the
demo runs offline. Every optimizer starts from the same weights and sees the same batches. The table shows final
loss, test accuracy, step time, and for the optimizers that keep an EMA of the weights, the EMA weights' accuracy
beside the raw weights'. The loss curves go to a PNG. Last, each of our optimizers' whole training step (forward
pass, loss, gradients, optimizer) is lowered to GE IR as one graph, saved as .air, and run in graph_ir.Session beside
TensorFlow (examples/demo_ge.py).
"""

from __future__ import annotations

import argparse
import time

import keras
import matplotlib
import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import tf_plugin  # noqa: F401  (loads the op library)
from demo_ge import lower_and_run, print_ge_table
from tf_plugin.optimizers import FusedEmaAdam, PowerSign

matplotlib.use("Agg")
import matplotlib.pyplot as plt

EMA_DECAY = 0.99


def load_data():
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    return train_test_split(x, digits.target.astype(np.int32), test_size=0.25, random_state=0, stratify=digits.target)


def build_model() -> keras.Model:
    keras.utils.set_random_seed(0)  # the same initial weights for every optimizer
    return keras.Sequential([
        keras.Input((64,)),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(10),
    ])


OPTIMIZERS = {
    "Keras Adam": lambda: keras.optimizers.Adam(1e-3),
    "Keras AdamW(use_ema)": lambda: keras.optimizers.AdamW(1e-3, weight_decay=1e-3, use_ema=True,
                                                          ema_momentum=EMA_DECAY),
    "tf_plugin PowerSign": lambda: PowerSign(0.03),
    "tf_plugin PowerSign(cosine)": lambda: PowerSign(0.03, sign_decay="cosine", decay_steps=1000),
    "tf_plugin FusedEmaAdam": lambda: FusedEmaAdam(1e-3, weight_decay=1e-3, ema_decay=EMA_DECAY),
}


class StepTimer(keras.callbacks.Callback):
    """Wall time of each train step (after the first epoch, which includes tracing)."""

    def __init__(self):
        super().__init__()
        self.times, self.epoch = [], 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        self.t0 = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        if self.epoch > 0:
            self.times.append(time.perf_counter() - self.t0)


class RawAccuracy(keras.callbacks.Callback):
    """Test accuracy of the raw weights at the end of the last epoch, before Keras's use_ema overwrites them."""

    def __init__(self, x, y, epochs):
        super().__init__()
        self.x, self.y, self.epochs, self.accuracy = x, y, epochs, None

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.epochs - 1:
            self.accuracy = accuracy(self.model, self.x, self.y)


def accuracy(model: keras.Model, x, y) -> float:
    return float(np.mean(np.argmax(model.predict(x, verbose=0, batch_size=512), axis=1) == y))


def train(name: str, data, epochs: int, batch_size: int) -> dict:
    x_train, x_test, y_train, y_test = data
    model = build_model()
    optimizer = OPTIMIZERS[name]()
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=False)
    timer, raw = StepTimer(), RawAccuracy(x_test, y_test, epochs)
    print(f"\n== {name}")
    history = model.fit(x_train, y_train, validation_data=(x_test, y_test), epochs=epochs, batch_size=batch_size,
                        shuffle=True, verbose=2, callbacks=[timer, raw])
    result = {
        "name": name,
        "loss": history.history["loss"],
        "val_loss": history.history["val_loss"],
        "step_ms": 1e3 * float(np.median(timer.times)),
        "raw_acc": raw.accuracy,
        "ema_acc": None,
        "model": model,
        "optimizer": optimizer,
    }
    if isinstance(optimizer, FusedEmaAdam):  # our EMA slot: swap it in, evaluate, swap back
        optimizer.swap_ema_weights(model.trainable_variables)
        result["ema_acc"] = accuracy(model, x_test, y_test)
        optimizer.swap_ema_weights(model.trainable_variables)
    elif getattr(optimizer, "use_ema", False):  # Keras has already overwritten the weights with its EMA
        result["ema_acc"] = accuracy(model, x_test, y_test)
    return result


def print_table(results: list[dict]) -> None:
    header = f"{'optimizer':<28} {'final loss':>10} {'val loss':>9} {'test acc':>9} {'EMA acc':>8} {'ms/step':>8}"
    print("\n" + header + "\n" + "-" * len(header))
    for r in results:
        ema = f"{r['ema_acc']:.4f}" if r["ema_acc"] is not None else "-"
        print(f"{r['name']:<28} {r['loss'][-1]:>10.4f} {r['val_loss'][-1]:>9.4f} {r['raw_acc']:>9.4f} "
              f"{ema:>8} {r['step_ms']:>8.2f}")


def plot(results: list[dict], path: str) -> None:
    fig, (ax_train, ax_val) = plt.subplots(1, 2, figsize=(11, 4.2))
    for r in results:
        epochs = np.arange(1, len(r["loss"]) + 1)
        ax_train.plot(epochs, r["loss"], label=r["name"])
        ax_val.plot(epochs, r["val_loss"], label=r["name"])
    for ax, title in ((ax_train, "training loss"), (ax_val, "test loss")):
        ax.set_yscale("log")
        ax.set_xlabel("epoch")
        ax.set_title(f"UCI digits MLP: {title}")
        ax.grid(True, alpha=0.3)
    ax_val.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"\nloss curves written to {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=25)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--plot", default="demo_loss_curves.png")
    parser.add_argument("--ge-dir", default="demo_air", help="where the lowered .air files go")
    args = parser.parse_args()
    tf.get_logger().setLevel("ERROR")  # each optimizer's fresh model retraces predict; that warning is expected
    data = load_data()
    print(f"UCI digits (scikit-learn's bundled copy): {len(data[0])} training and {len(data[1])} test images, "
          f"{args.epochs} epochs of batch {args.batch_size}")
    results = [train(name, data, args.epochs, args.batch_size) for name in OPTIMIZERS]
    print_table(results)
    plot(results, args.plot)
    x_train, _, y_train, _ = data
    ge_rows = [lower_and_run(r["name"], r["model"], r["optimizer"], x_train, y_train, args.ge_dir)
               for r in results if isinstance(r["optimizer"], (PowerSign, FusedEmaAdam))]
    print_ge_table(ge_rows)


if __name__ == "__main__":
    main()
