"""tf_plugin.optimizers (Keras 3): NumPy references over several steps, fit, config, saving, checkpoints, EMA, XLA."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from op_spec import reference
from tests.helpers.models import classification_data, small_model
from tf_plugin import optimizers
from tf_plugin.optimizers import FusedEmaAdam, PowerSign

STEPS = 6


def _problem(seed: int, shapes=((7,), (3, 5), ())):
    rng = np.random.default_rng(seed)
    values = [reference.random_tensor(rng, s, "float32") for s in shapes]
    grads = [[reference.random_tensor(rng, s, "float32") for s in shapes] for _ in range(STEPS)]
    return values, grads


def _apply_steps(opt, values, grads, *, in_function: bool):
    variables = [keras.Variable(v) for v in values]

    def apply(gs):
        opt.apply_gradients(zip(gs, variables))

    step = tf.function(apply) if in_function else apply
    for gs in grads:
        step([tf.constant(g) for g in gs])
    return variables


def _powersign_numpy(values, grads, *, lr_at, base, beta, decay_at):
    out = []
    for i, value in enumerate(values):
        var, m = value.astype(np.float64), np.zeros(value.shape)
        for t, gs in enumerate(grads):  # t = iterations before the update
            lr, sd = reference.as_float32(lr_at(t)), reference.as_float32(decay_at(t))
            var, m = reference.power_sign(var, m, lr, reference.as_float32(math.log(base)), sd,
                                          reference.as_float32(beta), gs[i].astype(np.float64))
        out.append(var)
    return out


POWERSIGN_CASES = {
    "default": ({}, lambda t: 1.0),
    "linear": ({"sign_decay": "linear", "decay_steps": 4}, lambda t: max(0.0, (4 - min(t, 4)) / 4)),
    "restart": ({"sign_decay": "restart", "decay_steps": 3}, lambda t: 0.5 * (1 + math.cos(math.pi * (min(t, 3) % 3) / 3))),
    "callable": ({"sign_decay": lambda step: 1.0 / (1.0 + tf.cast(step, tf.float32))}, lambda t: 1.0 / (1 + t)),
}


@pytest.mark.parametrize("in_function", [False, True], ids=["eager", "tf.function"])
@pytest.mark.parametrize("case", list(POWERSIGN_CASES))
def test_powersign_matches_numpy(case, in_function):
    kwargs, decay_at = POWERSIGN_CASES[case]
    values, grads = _problem(1)
    opt = PowerSign(learning_rate=0.05, base=2.0, beta=0.8, **kwargs)
    variables = _apply_steps(opt, values, grads, in_function=in_function)
    want = _powersign_numpy(values, grads, lr_at=lambda t: 0.05, base=2.0, beta=0.8, decay_at=decay_at)
    for got, w in zip(variables, want):
        np.testing.assert_allclose(got.numpy(), w, rtol=2e-6, atol=1e-7)
    assert int(opt.iterations.numpy()) == STEPS


def test_powersign_learning_rate_schedule():
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5)
    values, grads = _problem(2)
    opt = PowerSign(learning_rate=schedule)
    variables = _apply_steps(opt, values, grads, in_function=True)
    want = _powersign_numpy(values, grads, lr_at=lambda t: 0.1 * 0.5**t, base=math.e, beta=0.9,
                            decay_at=lambda t: 1.0)
    for got, w in zip(variables, want):
        np.testing.assert_allclose(got.numpy(), w, rtol=2e-6, atol=1e-7)


def _fused_numpy(values, grads, *, lr_at, weight_decays, **attrs):
    out = []
    for i, value in enumerate(values):
        var = value.astype(np.float64)
        m, v, s = np.zeros(var.shape), np.zeros(var.shape), var.copy()
        for t, gs in enumerate(grads, start=1):
            var, m, v, s, _ = reference.fused_ema_adam(gs[i], var, m, v, s, step=t, lr=lr_at(t - 1),
                                                       weight_decay=weight_decays[i], **attrs)
        out.append((var, m, v, s))
    return out


@pytest.mark.parametrize("mode,weight_decay", [("adamw", 0.02), ("l2", 0.02), ("adamw", 0.0)])
@pytest.mark.parametrize("bias_correction", [True, False])
@pytest.mark.parametrize("flat_state", [True, False])
def test_fused_ema_adam_matches_numpy(mode, weight_decay, bias_correction, flat_state):
    values, grads = _problem(3)
    opt = FusedEmaAdam(learning_rate=0.01, beta_1=0.8, beta_2=0.99, epsilon=1e-6, ema_decay=0.7,
                       weight_decay=weight_decay, mode=mode, bias_correction=bias_correction, flat_state=flat_state)
    variables = _apply_steps(opt, values, grads, in_function=True)
    want = _fused_numpy(values, grads, lr_at=lambda t: 0.01, weight_decays=[weight_decay] * 3, ema_decay=0.7,
                        beta1=0.8, beta2=0.99, eps=1e-6, mode={"l2": 0, "adamw": 1}[mode],
                        bias_correction=bias_correction)
    for var, (w_var, w_m, w_v, w_s) in zip(variables, want):
        np.testing.assert_allclose(var.numpy(), w_var, rtol=2e-5, atol=1e-7)
        if flat_state:
            m, v = opt.flat_slot("m", var), opt.flat_slot("v", var)
        else:
            m, v = opt._momentums[opt._get_variable_index(var)], opt._velocities[opt._get_variable_index(var)]
        np.testing.assert_allclose(m.numpy(), w_m, rtol=2e-5, atol=1e-8)
        np.testing.assert_allclose(v.numpy(), w_v, rtol=2e-5, atol=1e-9)
        np.testing.assert_allclose(opt.ema_variable(var).numpy(), w_s, rtol=2e-5, atol=1e-7)


def test_fused_ema_adam_schedule_and_excluded_variable():
    schedule = keras.optimizers.schedules.PiecewiseConstantDecay([2, 4], [0.01, 0.005, 0.001])
    values, grads = _problem(4)
    variables = [keras.Variable(v, name=n) for v, n in zip(values, ("kernel", "other", "bias"))]
    opt = FusedEmaAdam(learning_rate=schedule, weight_decay=0.1, ema_decay=0.5)
    opt.exclude_from_weight_decay(var_names=["bias"])
    step = tf.function(lambda gs: opt.apply_gradients(zip(gs, variables)))
    for gs in grads:
        step([tf.constant(g) for g in gs])
    lrs = [0.01, 0.01, 0.01, 0.005, 0.005, 0.001]  # iterations 0..5: boundaries at 2 and 4 are inclusive
    want = _fused_numpy(values, grads, lr_at=lambda t: lrs[t], weight_decays=[0.1, 0.1, 0.0], ema_decay=0.5,
                        beta1=0.9, beta2=0.999, eps=1e-8, mode=1, bias_correction=True)
    for var, w in zip(variables, want):
        np.testing.assert_allclose(var.numpy(), w[0], rtol=2e-5, atol=1e-7)


def test_ema_slot_starts_as_the_weights_and_swap_is_exact():
    values, grads = _problem(5)
    variables = [keras.Variable(v) for v in values]
    opt = FusedEmaAdam(learning_rate=0.05, ema_decay=0.5)
    opt.build(variables)
    for var, value in zip(variables, values):
        np.testing.assert_array_equal(opt.ema_variable(var).numpy(), value)
    for gs in grads:
        opt.apply_gradients(zip([tf.constant(g) for g in gs], variables))
    weights = [v.numpy() for v in variables]
    averages = [opt.ema_variable(v).numpy() for v in variables]
    assert not np.array_equal(weights[0], averages[0])
    opt.swap_ema_weights(variables)
    for var, w, a in zip(variables, weights, averages):
        np.testing.assert_array_equal(var.numpy(), a)
        np.testing.assert_array_equal(opt.ema_variable(var).numpy(), w)
    opt.swap_ema_weights(variables)
    for var, w, a in zip(variables, weights, averages):
        np.testing.assert_array_equal(var.numpy(), w)
        np.testing.assert_array_equal(opt.ema_variable(var).numpy(), a)


def test_use_ema_finalizes_with_the_fused_average_and_runs_no_second_average():
    x, y = classification_data(1)
    model = small_model()
    opt = FusedEmaAdam(learning_rate=0.01, ema_decay=0.9, use_ema=True)
    model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=64, epochs=1, verbose=0)
    names = [v.path for v in opt.variables]
    assert not any("average" in n for n in names), names
    for var in model.trainable_variables:  # fit() ended by overwriting the weights with s
        np.testing.assert_array_equal(var.numpy(), opt.ema_variable(var).numpy())
    with pytest.raises(ValueError, match="ema_decay"):
        FusedEmaAdam(ema_decay=0.9, ema_momentum=0.99)


def test_slots_in_tf_checkpoint(tmp_path):
    values, grads = _problem(6)
    variables = [tf.Variable(v) for v in values]
    opt = FusedEmaAdam(learning_rate=0.01, ema_decay=0.5)
    for gs in grads[:3]:
        opt.apply_gradients(zip([tf.constant(g) for g in gs], variables))
    checkpoint = tf.train.Checkpoint(variables=variables, optimizer=opt)
    path = checkpoint.save(str(tmp_path / "ckpt"))
    want = [v.numpy() for v in opt.variables]
    for gs in grads[3:]:
        opt.apply_gradients(zip([tf.constant(g) for g in gs], variables))
    checkpoint.restore(path).assert_consumed()
    for got, w in zip(opt.variables, want):
        np.testing.assert_array_equal(got.numpy(), w)


def test_sparse_gradients_from_an_embedding_are_densified():
    table = np.random.default_rng(7).standard_normal((10, 4)).astype(np.float32)
    for opt in (PowerSign(learning_rate=0.1), FusedEmaAdam(learning_rate=0.1)):
        var = tf.Variable(table)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.gather(var, [1, 3, 3]) ** 2)
        grad = tape.gradient(loss, var)
        assert isinstance(grad, tf.IndexedSlices)
        opt.apply_gradients([(grad, var)])
        changed = np.any(var.numpy() != table, axis=1)
        np.testing.assert_array_equal(np.nonzero(changed)[0], [1, 3])


def test_bad_arguments():
    with pytest.raises(ValueError, match="decay_steps"):
        PowerSign(sign_decay="linear")
    with pytest.raises(ValueError, match="sign_decay"):
        PowerSign(sign_decay=3)
    with pytest.raises(ValueError, match="base"):
        PowerSign(base=-1.0)
    with pytest.raises(ValueError, match="mode"):
        FusedEmaAdam(mode="adam")
    with pytest.raises(ValueError, match="beta_1"):
        FusedEmaAdam(beta_1=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        FusedEmaAdam(epsilon=0.0)
    with pytest.raises(ValueError, match="weight_decay"):
        FusedEmaAdam(weight_decay=-1.0)


def test_registered_for_keras_saving():
    for cls in (optimizers.PowerSign, optimizers.FusedEmaAdam):
        name = keras.saving.get_registered_name(cls)
        assert name == f"tf_plugin>{cls.__name__}"
        assert keras.saving.get_registered_object(name) is cls
