"""tf_plugin.compat.v1 optimizers: tf.contrib's PowerSign fixture (ref and resource variables, dense and sparse),
the sign decay at global_step before the increment, and FusedEmaAdamOptimizer against the float64 reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from op_spec import reference
from tf_plugin import sign_decay
from tf_plugin.compat.v1 import FusedEmaAdamOptimizer, PowerSignOptimizer

V1 = tf.compat.v1
TOL = {"float16": 1e-3, "bfloat16": 1e-2, "float32": 1e-6, "float64": 1e-6}


def py_linear_decay_fn(decay_steps):
    return lambda step: float(decay_steps - min(step, decay_steps)) / decay_steps


def powersign_update_numpy(params, g, m, lr, base=math.e, beta=0.9, py_sign_decay_fn=None, t=None):
    """tf.contrib's powersign_test reference: the decay of update t is evaluated at t - 1."""
    m_t = beta * m + (1 - beta) * g
    sd = 1.0 if py_sign_decay_fn is None else py_sign_decay_fn(t - 1)
    multiplier = base ** (sd * np.sign(g) * np.sign(m_t))
    return params - lr * multiplier * g, m_t


CONFIGS = {
    "default": {},
    "lr0.1-base10-beta0.8": {"learning_rate": 0.1, "base": 10.0, "beta": 0.8},
    "linear-decay-10": {"sign_decay_fn": 10},
}
SPARSE_CONFIGS = {
    "default": {},
    "lr0.01-base2-beta0.8": {"learning_rate": 0.01, "base": 2.0, "beta": 0.8},
    "linear-decay-10": {"sign_decay_fn": 10},
}


def _split(config):
    """(optimizer kwargs, numpy kwargs) for a config."""
    tf_kwargs, np_kwargs = dict(config), {}
    if "sign_decay_fn" in config:
        tf_kwargs["sign_decay_fn"] = sign_decay.get_linear_decay_fn(config["sign_decay_fn"])
        np_kwargs["py_sign_decay_fn"] = py_linear_decay_fn(config["sign_decay_fn"])
    np_kwargs.update(lr=config.get("learning_rate", 0.1), base=config.get("base", math.e),
                     beta=config.get("beta", 0.9))
    return tf_kwargs, np_kwargs


def _run_fixture(dtype: str, use_resource: bool, config: dict, sparse: bool) -> None:
    np_dtype = reference.NP_DTYPES[dtype]
    tf_kwargs, np_kwargs = _split(config)
    var0_np, var1_np = np.array([1.0, 2.0], np_dtype), np.array([3.0, 4.0], np_dtype)
    grads0_np, grads1_np = np.array([0.1, 0.1], np_dtype), np.array([0.01, 0.01], np_dtype)
    m0, m1 = 0.0, 0.0
    with tf.Graph().as_default(), V1.Session() as sess:
        global_step = V1.Variable(0, trainable=False, use_resource=use_resource)
        var0 = V1.Variable(var0_np, use_resource=use_resource)
        var1 = V1.Variable(var1_np, use_resource=use_resource)
        if sparse:
            def grads(values):
                return tf.IndexedSlices(tf.constant(values), tf.constant([0, 1]), tf.constant([2]))
        else:
            grads = tf.constant
        opt = PowerSignOptimizer(**tf_kwargs)
        update = opt.apply_gradients(
            [(grads(grads0_np), var0), (grads(grads1_np), var1)], global_step=global_step)
        neg_update = opt.apply_gradients(
            [(grads(-grads0_np), var0), (grads(-grads1_np), var1)], global_step=global_step)
        sess.run(V1.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(var0), var0_np)
        np.testing.assert_array_equal(sess.run(var1), var1_np)
        for t in range(1, 8):
            positive = t < 5
            sess.run(update if positive else neg_update)
            sign = 1.0 if positive else -1.0
            var0_np, m0 = powersign_update_numpy(var0_np.astype(np.float64), sign * grads0_np.astype(np.float64),
                                                 m0, t=t, **np_kwargs)
            var1_np, m1 = powersign_update_numpy(var1_np.astype(np.float64), sign * grads1_np.astype(np.float64),
                                                 m1, t=t, **np_kwargs)
            tol = TOL[dtype]
            np.testing.assert_allclose(sess.run(var0).astype(np.float64), var0_np, rtol=tol, atol=tol)
            np.testing.assert_allclose(sess.run(var1).astype(np.float64), var1_np, rtol=tol, atol=tol)
            assert sess.run(global_step) == t
            var0_np, var1_np = sess.run(var0), sess.run(var1)  # continue from what the op wrote (half dtypes)


@pytest.mark.parametrize("config", list(CONFIGS), ids=list(CONFIGS))
@pytest.mark.parametrize("use_resource", [False, True], ids=["ref", "resource"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_contrib_dense_fixture(dtype, use_resource, config):
    _run_fixture(dtype, use_resource, CONFIGS[config], sparse=False)


@pytest.mark.parametrize("config", list(SPARSE_CONFIGS), ids=list(SPARSE_CONFIGS))
@pytest.mark.parametrize("use_resource", [False, True], ids=["ref", "resource"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_contrib_sparse_fixture(dtype, use_resource, config):
    _run_fixture(dtype, use_resource, SPARSE_CONFIGS[config], sparse=True)


@pytest.mark.parametrize("use_resource", [False, True], ids=["ref", "resource"])
def test_sparse_partial_rows_and_duplicates_equal_tf_contrib_semantics(use_resource):
    """Rows without a gradient: m decays, var stays. Duplicate indices are summed (as scatter_sub would)."""
    rng = np.random.default_rng(5)
    var_np = reference.random_tensor(rng, (6, 3), "float32")
    values = reference.random_tensor(rng, (4, 3), "float32")
    indices = np.array([4, 1, 4, 0])
    dense = np.zeros_like(var_np)
    np.add.at(dense, indices, values)
    m_np = reference.random_tensor(rng, (6, 3), "float32")
    with tf.Graph().as_default(), V1.Session() as sess:
        var = V1.Variable(var_np, use_resource=use_resource)
        opt = PowerSignOptimizer(learning_rate=0.05)
        op = opt.apply_gradients([(tf.IndexedSlices(tf.constant(values), tf.constant(indices)), var)])
        sess.run(V1.global_variables_initializer())
        opt.get_slot(var, "m").load(m_np, sess)
        sess.run(op)
        want_var, want_m = reference.power_sign(var_np, m_np, 0.05, 1.0, 1.0, 0.9, dense)
        np.testing.assert_allclose(sess.run(var), want_var, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(sess.run(opt.get_slot(var, "m")), want_m, rtol=1e-6, atol=1e-7)
        untouched = [2, 3, 5]
        np.testing.assert_array_equal(sess.run(var)[untouched], var_np[untouched])


def test_without_global_step_the_optimizer_counts_its_own_steps():
    decay_fn = sign_decay.get_linear_decay_fn(4)
    py_decay = py_linear_decay_fn(4)
    var_np, m = np.array([1.0, -2.0, 0.5]), 0.0
    grad = np.array([0.3, -0.2, 0.0])
    var = tf.Variable(var_np.astype(np.float32))
    opt = PowerSignOptimizer(learning_rate=0.1, sign_decay_fn=decay_fn)
    for t in range(1, 7):  # eager: each call reads the count, then increments it
        opt.apply_gradients([(tf.constant(grad, tf.float32), var)])
        var_np, m = powersign_update_numpy(var_np, grad, m, lr=0.1, py_sign_decay_fn=py_decay, t=t)
        np.testing.assert_allclose(var.numpy(), var_np, rtol=1e-6)
    # In a tf.function too.
    var2 = tf.Variable([1.0, -2.0, 0.5])
    opt2 = PowerSignOptimizer(learning_rate=0.1, sign_decay_fn=decay_fn)

    @tf.function
    def step(g):
        opt2.apply_gradients([(g, var2)])

    for _ in range(6):
        step(tf.constant(grad, tf.float32))
    np.testing.assert_allclose(var2.numpy(), var.numpy(), rtol=1e-6)


def test_bad_base_is_rejected():
    with pytest.raises(ValueError, match="base must be > 0"):
        PowerSignOptimizer(base=0.0)


def _fused_reference(var, grads, *, lr, steps_offset=0, **attrs):
    m = np.zeros_like(var)
    v = np.zeros_like(var)
    s = var.copy()
    for t, g in enumerate(grads, start=1 + steps_offset):
        var, m, v, s, _ = reference.fused_ema_adam(g, var, m, v, s, step=t, lr=lr, **attrs)
    return var, m, v, s


FUSED_ATTRS = {"ema_decay": 0.9, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "bias_correction": True}


@pytest.mark.parametrize("mode,weight_decay", [(1, 0.01), (0, 0.01), (1, 0.0)])
@pytest.mark.parametrize("use_resource,flat_state", [(False, False), (True, False), (True, True)],
                         ids=["ref", "resource", "resource-flat"])
def test_fused_ema_adam_optimizer_graph_mode(use_resource, flat_state, mode, weight_decay):
    rng = np.random.default_rng(11)
    var_np = reference.random_tensor(rng, (17,), "float32")
    grads = [reference.random_tensor(rng, (17,), "float32") for _ in range(5)]
    with tf.Graph().as_default(), V1.Session() as sess:
        global_step = V1.train.get_or_create_global_step()
        var = V1.Variable(var_np, use_resource=use_resource)
        grad = V1.placeholder(tf.float32, (17,))
        opt = FusedEmaAdamOptimizer(learning_rate=0.01, ema_decay=0.9, mode=mode, weight_decay=weight_decay,
                                    flat_state=flat_state)
        op = opt.apply_gradients([(grad, var)], global_step=global_step)
        sess.run(V1.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(opt.get_slot(var, "s")), var_np)  # s starts as the weights
        for g in grads:
            sess.run(op, {grad: g})
        got = sess.run([var, opt.get_slot(var, "m"), opt.get_slot(var, "v"), opt.get_slot(var, "s")])
        assert sess.run(global_step) == 5
    want = _fused_reference(var_np.astype(np.float64), grads, lr=0.01, mode=mode, weight_decay=weight_decay,
                            **FUSED_ATTRS)
    for name, g, w in zip("vmvs", got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("flat_state", [False, True])
def test_fused_ema_adam_optimizer_eager_and_sparse(flat_state):
    rng = np.random.default_rng(12)
    var_np = reference.random_tensor(rng, (5, 2), "float32")
    values = reference.random_tensor(rng, (3, 2), "float32")
    indices = np.array([3, 0, 3])
    dense = np.zeros_like(var_np)
    np.add.at(dense, indices, values)
    var = tf.Variable(var_np)
    opt = FusedEmaAdamOptimizer(learning_rate=0.02, ema_decay=0.9, flat_state=flat_state)
    for _ in range(3):
        opt.apply_gradients([(tf.IndexedSlices(tf.constant(values), tf.constant(indices)), var)])
    want = _fused_reference(var_np.astype(np.float64), [dense] * 3, lr=0.02, mode=1, weight_decay=0.0,
                            **FUSED_ATTRS)
    np.testing.assert_allclose(var.numpy(), want[0], rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(opt.get_slot(var, "s").numpy(), want[3], rtol=2e-5, atol=1e-7)


def test_fused_ema_adam_optimizer_global_step_is_the_iteration_count():
    """With global_step = 9 given, the first update uses step 10 (the bias correction shows it)."""
    rng = np.random.default_rng(13)
    var_np = reference.random_tensor(rng, (8,), "float32")
    g = reference.random_tensor(rng, (8,), "float32")
    var = tf.Variable(var_np)
    global_step = tf.Variable(9, dtype=tf.int64)
    opt = FusedEmaAdamOptimizer(learning_rate=0.01, ema_decay=0.9)
    opt.apply_gradients([(tf.constant(g), var)], global_step=global_step)
    assert int(global_step.numpy()) == 10
    want = _fused_reference(var_np.astype(np.float64), [g], lr=0.01, steps_offset=9, mode=1, weight_decay=0.0,
                            **FUSED_ATTRS)
    np.testing.assert_allclose(var.numpy(), want[0], rtol=2e-5, atol=1e-7)


def test_flat_state_many_variables_equal_per_variable_slots():
    """TF1 flat state: the variables of two dtypes, one without a gradient in some steps, match per-variable slots."""
    rng = np.random.default_rng(21)
    shapes = [(3, 4), (1,), (7,), (2, 2, 2)]
    dtypes = [np.float32, np.float32, np.float16, np.float32]
    values = [reference.random_tensor(rng, s, np.dtype(d).name) for s, d in zip(shapes, dtypes)]
    results = []
    for flat_state in (False, True):
        variables = [tf.Variable(v) for v in values]
        opt = PowerSignOptimizer(learning_rate=0.05, flat_state=flat_state)
        for step in range(4):
            grads = [tf.constant(reference.random_tensor(np.random.default_rng(step * 10 + k), s, np.dtype(d).name))
                     for k, (s, d) in enumerate(zip(shapes, dtypes))]
            if step % 2:
                grads[1] = None  # no gradient: var and its m stay
            opt.apply_gradients(zip(grads, variables))
        results.append([v.numpy() for v in variables] + [np.asarray(opt.get_slot(v, "m")) for v in variables])
    for got, want in zip(results[1], results[0]):
        np.testing.assert_array_equal(got, want)


def test_flat_state_refuses_ref_variables():
    with tf.Graph().as_default():
        var = V1.Variable(np.ones(3, np.float32), use_resource=False)
        with pytest.raises(ValueError, match="flat_state=True needs resource variables"):
            PowerSignOptimizer(flat_state=True).apply_gradients([(tf.ones(3), var)])
