"""FusedEmaAdam ops: float64 references, stock ResourceApplyAdam equivalence, graph modes, in place, errors."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import tensorflow as tf

import tf_plugin
from op_spec.reference import fused_ema_adam, random_tensor
from op_spec.reference import fused_ema_adam_state as make_state
from tests.helpers.fused_ema_adam import HYPER, apply, check_one_step
from tests.helpers.threads import run_concurrently_or_serially

DTYPES = ["float16", "bfloat16", "float32"]
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
@pytest.mark.parametrize("bias_correction", [True, False])
@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_each_step_against_float64(dtype, mode, bias_correction, weight_decay):
    """Steps 1..6, then 1000 and 5000: every step checked from the inputs it was given."""
    rng = np.random.default_rng(hash((dtype, mode, bias_correction, weight_decay)) % 2**32)
    shape = (1001,)
    attrs = {**HYPER, "mode": mode, "bias_correction": bias_correction, "weight_decay": weight_decay}
    variables = [tf.Variable(x) for x in make_state(rng, shape, dtype)]
    for step in [1, 2, 3, 4, 5, 6, 1000, 5000]:
        before = [x.numpy().copy() for x in variables]
        grad = random_tensor(rng, shape, dtype)
        lr = float(rng.uniform(1e-4, 0.1))
        apply(variables, grad, step, lr, **attrs)
        check_one_step([x.numpy() for x in variables], before, grad, dtype, step, lr, attrs)


@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (2, 3, 1, 4), (0,), (4, 0, 3), (65_537,)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
def test_shapes(dtype, shape):
    rng = np.random.default_rng(hash((dtype, shape)) % 2**32)
    attrs = {**HYPER, "mode": 1, "bias_correction": True, "weight_decay": 0.02}
    variables = [tf.Variable(x) for x in make_state(rng, shape, dtype)]
    before = [x.numpy().copy() for x in variables]
    grad = random_tensor(rng, shape, dtype)
    apply(variables, grad, 3, 0.01, **attrs)
    check_one_step([x.numpy() for x in variables], before, grad, dtype, 3, 0.01, attrs)
    assert all(x.shape == shape for x in variables)


@pytest.mark.parametrize("mode", [0, 1])
def test_thousands_of_steps_track_float64(mode):
    """float32 over 3000 steps against a float64 trajectory that never rounds."""
    rng = np.random.default_rng(20 + mode)
    shape = (37,)
    attrs = {**HYPER, "mode": mode, "bias_correction": True, "weight_decay": 0.01}
    state = make_state(rng, shape, "float32")
    variables = [tf.Variable(x) for x in state]
    ref = [x.astype(np.float64) for x in state]
    grads = tf.constant(random_tensor(rng, (3000, *shape), "float32"))

    @tf.function
    def run(grads):
        for i in tf.range(3000):
            apply(variables, grads[i], tf.cast(i, tf.int64) + 1, 1e-3, **attrs)

    run(grads)
    g = grads.numpy()
    for i in range(3000):
        ref = list(fused_ema_adam(g[i], *ref, step=i + 1, lr=1e-3, **attrs)[:4])
    for name, got, want in zip(["var", "m", "v", "s"], variables, ref):
        scale = np.abs(want) + 1e-3  # lr: one step's size
        rel = np.abs(got.numpy() - want) / scale
        assert rel.max() < 1e-4, f"{name} drifted {rel.max():.2e}"


def test_mode1_equals_stock_adam_then_ema():
    """mode 1, no weight decay: stock ResourceApplyAdam with epsilon = eps * sqrt(1 - beta2^t), then the EMA."""
    rng = np.random.default_rng(31)
    shape = (5003,)
    b1, b2, eps, ema, lr = 0.9, 0.999, 1e-8, 0.99, 0.01
    state = make_state(rng, shape, "float32")
    ours = [tf.Variable(x) for x in state]
    stock = [tf.Variable(x) for x in state]
    for step in range(1, 9):
        grad = tf.constant(random_tensor(rng, shape, "float32"))
        apply(ours, grad, step, lr, ema_decay=ema, beta1=b1, beta2=b2, eps=eps, mode=1, bias_correction=True)
        b1p, b2p = np.float32(b1) ** step, np.float32(b2) ** step
        tf.raw_ops.ResourceApplyAdam(
            var=stock[0].handle, m=stock[1].handle, v=stock[2].handle, beta1_power=b1p, beta2_power=b2p, lr=lr,
            beta1=b1, beta2=b2, epsilon=np.float32(eps * np.sqrt(1 - float(b2p))), grad=grad,
        )
        stock[3].assign(ema * stock[3] + (1 - ema) * stock[0])
    for name, a, b in zip(["var", "m", "v", "s"], ours, stock):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-5, atol=2e-5 * lr, err_msg=name)


def test_lr_changes_inside_one_function():
    rng = np.random.default_rng(41)
    shape = (129,)
    attrs = {**HYPER, "mode": 1, "bias_correction": True, "weight_decay": 0.1}
    state = make_state(rng, shape, "float32")
    variables = [tf.Variable(x) for x in state]
    grad = random_tensor(rng, shape, "float32")

    @tf.function
    def train_step(step, lr):
        apply(variables, grad, step, lr, **attrs)

    ref = [x.astype(np.float64) for x in state]
    for step, lr in enumerate([0.1, 0.05, 0.0, 0.02, 1e-4], start=1):
        train_step(tf.constant(step, tf.int64), tf.constant(lr, tf.float32))
        ref = list(fused_ema_adam(grad, *ref, step=step, lr=lr, **attrs)[:4])
    assert train_step.experimental_get_tracing_count() == 1
    for got, want in zip(variables, ref):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_ref_variables_in_v1_session(dtype):
    rng = np.random.default_rng(51)
    shape = (6, 7)
    attrs = {**HYPER, "mode": 0, "bias_correction": True, "weight_decay": 0.01}
    state = make_state(rng, shape, dtype)
    grads = [random_tensor(rng, shape, dtype) for _ in range(3)]
    with tf.Graph().as_default():
        refs = [tf.compat.v1.Variable(x, use_resource=False) for x in state]
        g = tf.compat.v1.placeholder(state[0].dtype, shape)
        step = tf.compat.v1.placeholder(tf.int64, [])
        out = tf_plugin.raw_ops.ApplyFusedEmaAdam(
            var=refs[0], m=refs[1], v=refs[2], s=refs[3], grad=g, step=step, lr=0.05, **attrs
        )
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            for i, gv in enumerate(grads, start=1):
                before = sess.run(refs)
                returned = sess.run(out, {g: gv, step: i})
                after = sess.run(refs)
                np.testing.assert_array_equal(returned, after[0])  # the op returns the updated var
                check_one_step(after, before, gv, dtype, i, 0.05, attrs)


def _buffer_address(v: tf.Variable) -> int:
    return v.read_value().numpy().__array_interface__["data"][0]  # an eager CPU tensor's numpy() shares its buffer


def test_updates_in_place_and_copy_on_write():
    rng = np.random.default_rng(61)
    variables = [tf.Variable(x) for x in make_state(rng, (64,), "float32")]
    grad = tf.constant(random_tensor(rng, (64,), "float32"))
    apply(variables, grad, 1, 0.1)  # the first update may copy: buffers can be shared with the initial values
    gc.collect()
    addresses = [_buffer_address(x) for x in variables]
    gc.collect()
    apply(variables, grad, 2, 0.1)
    assert [_buffer_address(x) for x in variables] == addresses  # nothing else held them: in place
    held = [x.read_value() for x in variables]  # these hold the buffers: the update must copy
    snapshots = [h.numpy().copy() for h in held]
    apply(variables, grad, 3, 0.1, ema_decay=0.5)
    for h, snap, x in zip(held, snapshots, variables):
        np.testing.assert_array_equal(h.numpy(), snap)
        assert not np.array_equal(x.numpy(), snap)


def test_concurrent_locked_updates_equal_serial():
    rng = np.random.default_rng(71)
    state = make_state(rng, (40_000,), "float32")
    grad = tf.constant(random_tensor(rng, (40_000,), "float32"))
    threads, per_thread = 6, 4

    def run(concurrent: bool):
        variables = [tf.Variable(x) for x in state]

        def work():
            for _ in range(per_thread):
                apply(variables, grad, 7, 0.01, use_locking=True, weight_decay=0.01)

        run_concurrently_or_serially(work, threads, concurrent)
        return [x.numpy() for x in variables]

    for a, b in zip(run(True), run(False)):
        np.testing.assert_array_equal(a, b)


def test_nan_and_inf_propagate():
    """No special cases: NaN and Inf flow through the arithmetic as in the float64 formula."""
    var0 = np.array([1.0, np.nan, 1.0, np.inf, 2.0, 1.0], np.float32)
    g = np.array([np.nan, 0.1, np.inf, 0.1, 0.0, -np.inf], np.float32)
    state = [var0, np.zeros(6, np.float32), np.zeros(6, np.float32), var0.copy()]
    variables = [tf.Variable(x) for x in state]
    attrs = {**HYPER, "mode": 0, "bias_correction": True, "weight_decay": 0.01}
    apply(variables, g, 1, 0.1, **attrs)
    ref = fused_ema_adam(g, *state, step=1, lr=0.1, **attrs)[:4]
    for got, want in zip(variables, ref):
        got = got.numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)].astype(np.float32))
