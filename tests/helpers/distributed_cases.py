"""The model kinds of issue 46 item 4 beyond the small dense model, for tests/helpers/distributed_lowering.py: each
case's model, data and optimizer (made in the strategy's scope), the tf.function step a user writes for it, and, for
Keras's fit, TF's own run through model.fit.

- "bn_sgd" / "sync_bn_sgd": Dense -> BatchNormalization (plain: moving statistics per replica, as Keras makes them
  with aggregation "none", keras/src/layers/normalization/batch_normalization.py; synchronized=True: the batch moments
  all-reduced, keras/src/backend/tensorflow/nn.py moments) -> Dense, SGD with momentum.
- "clip_sgd": a manual SPMD step: the replica's gradients all-reduced (replica_context.all_reduce "SUM"), clipped by
  their global norm, each replica updating its copy. Keras 3's optimizers all-reduce whatever gradients they are given
  (keras/src/backend/tensorflow/optimizer.py _backend_update_step calls _all_reduce_sum_gradients; there is no
  experimental_aggregate_gradients / skip_gradients_aggregation), so the step applies SGD itself.
- "transformer_adam": MultiHeadAttention + LayerNormalization + Dense feed-forward (a transformer encoder block), Adam.
- "mixed_loss_scale": mixed_float16 with Keras's LossScaleOptimizer(SGD); its initial scale overflows the float16
  gradients of the first step, which every replica then skips (the scale halves).
- "fit_sgd": the very tf.function model.fit runs for each batch (keras/src/backend/tensorflow/trainer.py
  _make_function's one_step_on_data: strategy.run(train_step), then reduce_per_replica "auto"), lowered, then run by
  TF's model.fit on the same batches.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

CASES = ("bn_sgd", "sync_bn_sgd", "clip_sgd", "transformer_adam", "mixed_loss_scale", "fit_sgd")
# The absolute bound on the variables whose gradient is exactly zero (zero_gradient below): TF's and ours carry only
# rounding noise there (|gradient| about 1e-9), which SGD moves by lr * noise (about 1e-8 after 3 steps) and Adam by
# up to lr * noise / epsilon per step (about 1e-4 at most: 0.01 * 1e-8 / 1e-7), while a real gradient moves Adam's
# weights by about lr = 1e-2 a step. Both values must stay within the bound of the variable's zero initial value.
ZERO_GRADIENT_BOUND = {"bn_sgd": 1e-6, "sync_bn_sgd": 1e-6, "transformer_adam": 1e-3}
SEQUENCE, WIDTH = 6, 8
CLIP_NORM, CLIP_LR = 0.5, 0.2
LOSS_SCALE = 2.0 ** 18  # on 2 replicas: float16 gradients overflow at this scale on the first step, not at half of it


def is_case(name: str) -> bool:
    """Whether `name` is one of this module's cases (else tests/helpers/distributed_lowering.py's own)."""
    return name in CASES


def _bn_model(synchronized: bool) -> Any:
    """Dense (its bias before the normalization: a zero gradient), BatchNormalization, ReLU, Dense on 8 features."""
    import keras

    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(16), keras.layers.BatchNormalization(
        synchronized=synchronized, momentum=0.9), keras.layers.ReLU(), keras.layers.Dense(3)])


def _transformer() -> Any:
    """An encoder block on (SEQUENCE, WIDTH) inputs, pooled to 3 classes."""
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input((SEQUENCE, WIDTH))
    attended = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)(inputs, inputs)
    x = keras.layers.LayerNormalization()(inputs + attended)
    forward = keras.layers.Dense(WIDTH)(keras.layers.Dense(16, activation="relu")(x))
    x = keras.layers.LayerNormalization()(x + forward)
    return keras.Model(inputs, keras.layers.Dense(3)(keras.layers.GlobalAveragePooling1D()(x)))


def model_and_data(name: str, rows: int) -> tuple[Any, np.ndarray, np.ndarray]:
    """(model, x, y) of `rows` rows for case `name` (call in the strategy's scope)."""
    import keras

    from tests.helpers.models import classification_data, small_model

    x, y = classification_data(3, n=rows)
    if name in ("bn_sgd", "sync_bn_sgd"):
        return _bn_model(name == "sync_bn_sgd"), x, y
    if name == "transformer_adam":
        sequences = np.random.default_rng(6).standard_normal((rows, SEQUENCE, WIDTH)).astype(np.float32)
        return _transformer(), sequences, y
    if name == "mixed_loss_scale":
        keras.mixed_precision.set_global_policy("mixed_float16")
        try:
            model = small_model()
        finally:
            keras.mixed_precision.set_global_policy("float32")
        return model, x, y
    return small_model(), x, y


def zero_gradient(name: str, model: Any) -> list[Any]:
    """The variables of case `name` whose gradient is exactly zero, so that TF's runs and ours carry only rounding
    noise (tested against ZERO_GRADIENT_BOUND, not by scale): the Dense bias before BatchNormalization (the batch mean
    removes it) and the attention's key bias (softmax over the keys is invariant to q.b_k, the same for every key)."""
    if name in ("bn_sgd", "sync_bn_sgd"):
        return [model.layers[0].bias]
    if name == "transformer_adam":
        attention = next(layer for layer in model.layers if "attention" in type(layer).__name__.lower())
        return [attention.key_dense.bias]
    return []


def per_replica(name: str, model: Any) -> list[Any]:
    """Variables TF keeps per replica (aggregation "none" or on-read): plain BatchNormalization's moving statistics
    (their copies differ between replicas), Keras's loss tracker (keras/src/metrics/metric.py add_variable:
    synchronization "on_read")."""
    if name == "bn_sgd":
        return [model.layers[1].moving_mean, model.layers[1].moving_variance]
    return list(model.metrics_variables) if name == "fit_sgd" else []


def optimizer(name: str, replicas: int) -> Any:
    """Case `name`'s optimizer (call in the strategy's scope) for `replicas` replicas."""
    import keras

    if name == "transformer_adam":
        return keras.optimizers.Adam(0.01)
    if name == "mixed_loss_scale":  # the gradients of a replica's rows scale as 1 / the global batch
        return keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1), initial_scale=LOSS_SCALE * replicas / 2)
    return keras.optimizers.SGD(0.1, momentum=0.9)


def step(name: str, strategy: Any, model: Any, opt: Any, loss_fn: Any, global_batch: int) -> Any:
    """The tf.function a user writes for case `name`: (x, y) of each replica -> the global batch's loss; for fit_sgd,
    Keras's own per-batch step (its one argument: arguments() below; it returns the logs)."""
    import tensorflow as tf

    if name == "fit_sgd":  # the tf.function model.fit runs for each batch (steps_per_execution 1)
        model.make_train_function()
        # keras/src/backend/tensorflow/trainer.py _make_function: train_function(iterator) calls one_step_on_data,
        # _autoconvert_optionals's functools.wraps around the tf.function strategy.run(train_step) +
        # reduce_per_replica(logs, "auto"); Keras has no public handle on it
        return inspect.getclosurevars(model.train_function).nonlocals["one_step_on_data"].__wrapped__

    def replica_fn(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, tf.cast(model(xb, training=True), tf.float32)) / global_batch
            scaled = opt.scale_loss(loss) if hasattr(opt, "scale_loss") else loss
        grads = tape.gradient(scaled, model.trainable_variables)
        if name != "clip_sgd":
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        # a manual SPMD step: the sum of the replicas' gradients, clipped by its global norm, applied on each replica
        grads = tf.distribute.get_replica_context().all_reduce("SUM", grads)
        clipped, _ = tf.clip_by_global_norm(grads, CLIP_NORM)
        for variable, grad in zip(model.trainable_variables, clipped):
            variable.assign_sub(CLIP_LR * grad)
        return loss

    @tf.function
    def custom_step(xb, yb):
        return strategy.reduce("SUM", strategy.run(replica_fn, args=(xb, yb)), axis=None)

    return custom_step


def arguments(name: str, xb: Any, yb: Any) -> tuple:
    """The step's arguments for a batch: (x, y), or fit's one `data` argument (x, y)."""
    return ((xb, yb),) if name == "fit_sgd" else (xb, yb)


def compile_for_fit(name: str, model: Any, opt: Any) -> None:
    """fit_sgd: the model compiled (in the strategy's scope) with sparse categorical cross-entropy (Keras's mean over
    the replica's rows, scaled by 1 / replicas for the all-reduce) and no metrics."""
    import keras

    if name == "fit_sgd":
        model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def fit_losses(model: Any, x: np.ndarray, y: np.ndarray, global_batch: int, steps: int) -> list[float]:
    """TF's own run: model.fit over `steps` global batches in order; after each, the logs' "loss" (Keras's loss
    tracker: the running mean over the epoch's batches, as the lowered train_step returns it)."""
    import keras

    losses: list[float] = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            losses.append(float(logs["loss"]))

    model.fit(x[:global_batch * steps], y[:global_batch * steps].astype(np.int64), batch_size=global_batch,
              epochs=1, steps_per_epoch=steps, shuffle=False, verbose=0, callbacks=[Record()])
    return losses
