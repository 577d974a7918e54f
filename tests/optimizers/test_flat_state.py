"""Flat optimizer state (the Keras default) against per-variable slots (flat_state=False): bitwise the same weights,
slots and EMA, across mixed dtypes, steps where a variable has no gradient, exclude_from_weight_decay, sparse
gradients, LossScaleOptimizer, checkpoints, swap_ema_weights and use_ema's overwrite."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from op_spec import reference
from tf_plugin.optimizers import FusedEmaAdam, PowerSign

SHAPES = [(7,), (3, 5), (), (1,), (4, 4)]
DTYPES = ["float32", "float16", "float32", "bfloat16", "float32"]
MAKERS = {
    "powersign": lambda flat: PowerSign(0.05, sign_decay="linear", decay_steps=10, flat_state=flat),
    "fused_ema_adam": lambda flat: FusedEmaAdam(0.01, weight_decay=0.02, ema_decay=0.8, flat_state=flat),
    "fused_ema_adam-l2": lambda flat: FusedEmaAdam(0.01, weight_decay=0.02, mode="l2", flat_state=flat),
}
USE_EMA = lambda flat: FusedEmaAdam(0.01, weight_decay=0.02, ema_decay=0.8, use_ema=True,
                                    flat_state=flat)


def _bits(x) -> np.ndarray:
    x = np.asarray(x)
    return x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint32)


def _variables(seed: int = 0) -> list[keras.Variable]:
    rng = np.random.default_rng(seed)
    return [keras.Variable(reference.random_tensor(rng, s, "float32").astype(reference.NP_DTYPES[d]), dtype=d,
                           name=f"w{k}" if k != 4 else "bias") for k, (s, d) in enumerate(zip(SHAPES, DTYPES))]


def _grads(step: int) -> list:
    rng = np.random.default_rng(100 + step)
    grads = [tf.constant(reference.random_tensor(rng, s, "float32").astype(reference.NP_DTYPES[d]))
             for s, d in zip(SHAPES, DTYPES)]
    if step % 2:
        grads[1] = None  # no gradient this step: the variable and its slots stay
    if step % 3 == 2:  # a sparse gradient (as an Embedding gives): rows 0 and 2, row 0 twice
        dense = grads[4]
        grads[4] = tf.IndexedSlices(tf.stack([dense[0], dense[2], dense[0]]), tf.constant([0, 2, 0]),
                                    tf.constant([4, 4]))
    return grads


def _train(name: str, flat: bool, steps: int = 6):
    variables = _variables()
    opt = USE_EMA(flat) if name == "use_ema" else MAKERS[name](flat)
    if name.startswith("fused") or name == "use_ema":
        opt.exclude_from_weight_decay(var_names=["bias"])
    opt.build(variables)

    @tf.function
    def step(*grads):
        opt.apply_gradients([(g, v) for g, v in zip(grads, variables) if g is not None])

    for k in range(steps):
        step(*[g for g in _grads(k)])
    return opt, variables


def _slots(opt, variables) -> list[np.ndarray]:
    names = ["m"] if isinstance(opt, PowerSign) else ["m", "v", "s"]
    out = []
    for name in names:
        for v in variables:
            if opt.flat_state:
                out.append(np.asarray(opt.flat_slot(name, v)))
            else:
                slots = {"m": opt._momentums, "v": getattr(opt, "_velocities", None), "s": getattr(opt, "_averages", None)}
                out.append(np.asarray(slots[name][opt._get_variable_index(v)]))
    return out


@pytest.mark.parametrize("name", list(MAKERS))
def test_flat_state_is_bitwise_per_variable_state(name):
    flat_opt, flat_vars = _train(name, True)
    per_opt, per_vars = _train(name, False)
    for a, b in zip(flat_vars, per_vars):
        np.testing.assert_array_equal(_bits(a.numpy()), _bits(b.numpy()))
    for a, b in zip(_slots(flat_opt, flat_vars), _slots(per_opt, per_vars)):
        np.testing.assert_array_equal(_bits(a), _bits(b))
    # One flat variable per dtype and slot name.
    slot_names = sorted(v.name for v in flat_opt.variables if v.name.split("_")[0] in ("m", "v", "s"))
    per_dtype = ["bfloat16", "float16", "float32"]
    expected = [f"{s}_{d}" for s in (["m"] if name == "powersign" else ["m", "s", "v"]) for d in per_dtype]
    assert slot_names == sorted(expected)


def test_swap_ema_weights_and_use_ema_overwrite_match_per_variable_state():
    results = []
    for flat in (True, False):
        opt, variables = _train("use_ema", flat, steps=3)
        opt.swap_ema_weights(variables[:3])  # a subset: the others keep their weights
        swapped = [v.numpy() for v in variables] + [np.asarray(opt.ema_variable(v)) for v in variables]
        opt.swap_ema_weights(variables[:3])
        opt.finalize_variable_values(variables)  # Keras's end of fit with use_ema: the weights become s
        results.append(swapped + [v.numpy() for v in variables])
    for a, b in zip(*results):
        np.testing.assert_array_equal(_bits(a), _bits(b))


def test_checkpoint_round_trip_continues_identically(tmp_path):
    opt, variables = _train("fused_ema_adam", True, steps=2)
    path = tf.train.Checkpoint(optimizer=opt, variables=variables).write(str(tmp_path / "ckpt"))
    restored_vars = _variables(seed=9)  # other values, overwritten by the restore
    restored = MAKERS["fused_ema_adam"](True)
    restored.exclude_from_weight_decay(var_names=["bias"])
    restored.build(restored_vars)
    tf.train.Checkpoint(optimizer=restored, variables=restored_vars).read(path).assert_consumed()
    for o, vs in ((opt, variables), (restored, restored_vars)):
        for k in range(2, 4):
            o.apply_gradients([(g, v) for g, v in zip(_grads(k), vs) if g is not None])
    for a, b in zip([*variables, *_slots(opt, variables)], [*restored_vars, *_slots(restored, restored_vars)]):
        np.testing.assert_array_equal(_bits(np.asarray(a)), _bits(np.asarray(b)))


@pytest.mark.parametrize("name", ["powersign", "fused_ema_adam"])
def test_loss_scale_optimizer_with_mixed_precision_matches_per_variable_state(name):
    results = []
    for flat in (True, False):
        keras.utils.set_random_seed(0)
        keras.mixed_precision.set_global_policy("mixed_float16")
        try:
            model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"),
                                      keras.layers.Dense(3, dtype="float32")])
            opt = keras.optimizers.LossScaleOptimizer(MAKERS[name](flat))
            model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          jit_compile=False)
            rng = np.random.default_rng(1)
            x, y = rng.standard_normal((64, 6)).astype(np.float32), rng.integers(0, 3, 64)
            model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False)
            results.append([w.copy() for w in model.get_weights()])
        finally:
            keras.mixed_precision.set_global_policy("float32")
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
