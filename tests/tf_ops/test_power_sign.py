"""PowerSign ops: parity with stock tf.raw_ops, float64 references, graph modes, in place, errors."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import tensorflow as tf

import tf_plugin
from op_spec.reference import NP_DTYPES, power_sign, random_tensor
from tests.helpers.threads import run_concurrently_or_serially

SHAPES = [(), (1,), (7,), (3, 5), (2, 3, 4, 5), (0,), (4, 0, 3), (100_003,)]


def hyper(rng: np.random.Generator) -> dict[str, float]:
    return {
        "lr": float(rng.uniform(0.001, 0.5)),
        "logbase": float(rng.uniform(0.1, 2.0)),
        "sign_decay": float(rng.uniform(0.0, 1.0)),
        "beta": float(rng.uniform(0.0, 0.99)),
    }


def run_resource(op, var0, m0, grads, h, dtype):
    var, m = tf.Variable(var0), tf.Variable(m0)
    for g in grads:
        op(var=var.handle, m=m.handle, grad=tf.constant(g), **{k: tf.constant(v, dtype) for k, v in h.items()})
    return var.numpy(), m.numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_resource_matches_stock(dtype, shape):
    rng = np.random.default_rng(abs(hash((dtype, shape))) % 2**32)
    var0, m0 = random_tensor(rng, shape, dtype), random_tensor(rng, shape, dtype)
    grads = [random_tensor(rng, shape, dtype) for _ in range(4)]
    h = hyper(rng)
    ours = run_resource(tf_plugin.raw_ops.ResourceApplyPowerSign, var0, m0, grads, h, dtype)
    stock = run_resource(tf.raw_ops.ResourceApplyPowerSign, var0, m0, grads, h, dtype)
    tol = {"float32": 1e-6, "float64": 1e-14}[dtype]
    for a, b in zip(ours, stock):
        # Ours computes (exp * grad) * lr as the Ascend kernel does, stock lr * exp * grad: a rounding apart.
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * (np.abs(var0).max(initial=0) + 1))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_types_against_float64(dtype):
    rng = np.random.default_rng(7 if dtype == "float16" else 8)
    shape = (10_007,)
    var0, m0, g = (random_tensor(rng, shape, dtype) for _ in range(3))
    h = {k: float(np.asarray(v).astype(NP_DTYPES[dtype])) for k, v in hyper(rng).items()}
    ours = run_resource(tf_plugin.raw_ops.ResourceApplyPowerSign, var0, m0, [g], h, dtype)
    stock = run_resource(tf.raw_ops.ResourceApplyPowerSign, var0, m0, [g], h, dtype)
    ref_var, ref_m = power_sign(var0, m0, h["lr"], h["logbase"], h["sign_decay"], h["beta"], g)
    info = np.finfo(NP_DTYPES[dtype])
    eps, floor = float(info.eps), float(info.smallest_subnormal)  # below the normals the error is absolute
    # Error bound: one rounding of the result plus float32 rounding of each operand's contribution.
    scale_var = np.abs(var0.astype(np.float64)) + np.abs(ref_var - var0.astype(np.float64)) + np.abs(ref_var)
    scale_m = np.abs(m0.astype(np.float64)) + np.abs(g.astype(np.float64)) + np.abs(ref_m)
    err_var = np.abs(ours[0].astype(np.float64) - ref_var)
    err_m = np.abs(ours[1].astype(np.float64) - ref_m)
    assert np.all(err_var <= eps * scale_var + floor)
    assert np.all(err_m <= eps * scale_m + floor)
    stock_err_var = np.abs(stock[0].astype(np.float64) - ref_var)
    stock_err_m = np.abs(stock[1].astype(np.float64) - ref_m)
    assert err_var.max() <= stock_err_var.max()
    assert err_m.max() <= stock_err_m.max()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("n", [7, 37, 100_003])
def test_one_variable_as_var_and_m_gives_what_stock_gives(dtype, n):
    """var and m the same variable: as in stock, the update is copied on write, so m's write wins and the variable
    holds m_t (float32: within a rounding of stock; half types: m_t rounded once from float32)."""
    rng = np.random.default_rng(n)
    x, g = random_tensor(rng, (n,), dtype), random_tensor(rng, (n,), dtype)
    h = {k: float(np.asarray(v).astype(NP_DTYPES[dtype])) for k, v in hyper(rng).items()}
    results = []
    for op in (tf_plugin.raw_ops.ResourceApplyPowerSign, tf.raw_ops.ResourceApplyPowerSign):
        v = tf.Variable(x)
        op(var=v.handle, m=v.handle, grad=tf.constant(g), **{k: tf.constant(a, tf.as_dtype(dtype)) for k, a in h.items()})
        results.append(v.numpy().astype(np.float64))
    m_t = power_sign(x, x, h["lr"], h["logbase"], h["sign_decay"], h["beta"], g)[1]
    eps = {"float32": 1e-6}.get(dtype, float(np.finfo(NP_DTYPES[dtype]).eps))
    scale = np.abs(x.astype(np.float64)) + np.abs(g.astype(np.float64)) + np.abs(m_t)
    for got in results:  # ours, then stock
        assert np.all(np.abs(got - m_t) <= eps * scale + float(np.finfo(NP_DTYPES[dtype]).smallest_subnormal))


def test_tf_function_and_scalar_shape_one():
    rng = np.random.default_rng(3)
    var0, m0, g = (random_tensor(rng, (33,), "float32") for _ in range(3))
    var, m = tf.Variable(var0), tf.Variable(m0)

    @tf.function
    def step(grad):
        tf_plugin.raw_ops.ResourceApplyPowerSign(
            var=var.handle, m=m.handle, lr=[0.1], logbase=[1.0], sign_decay=[0.5], beta=[0.9], grad=grad
        )

    step(tf.constant(g))
    step(tf.constant(g))
    ref = (var0, m0)
    for _ in range(2):
        ref = power_sign(ref[0], ref[1], 0.1, 1.0, 0.5, 0.9, g)
    np.testing.assert_allclose(var.numpy(), ref[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.numpy(), ref[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_ref_variables_in_v1_session(dtype):
    rng = np.random.default_rng(5)
    var0, m0 = random_tensor(rng, (6, 7), dtype), random_tensor(rng, (6, 7), dtype)
    grads = [random_tensor(rng, (6, 7), dtype) for _ in range(3)]
    h = hyper(rng)
    results = []
    for apply in (tf_plugin.raw_ops.ApplyPowerSign, tf.raw_ops.ApplyPowerSign):
        with tf.Graph().as_default():
            var = tf.compat.v1.Variable(var0, use_resource=False)
            m = tf.compat.v1.Variable(m0, use_resource=False)
            g = tf.compat.v1.placeholder(var0.dtype, var0.shape)
            out = apply(var=var, m=m, grad=g, **{k: tf.constant(v, var0.dtype) for k, v in h.items()})
            with tf.compat.v1.Session() as sess:
                sess.run(tf.compat.v1.global_variables_initializer())
                for gv in grads:
                    returned = sess.run(out, {g: gv})
                results.append((returned, sess.run(var), sess.run(m)))
    ours, stock = results
    np.testing.assert_array_equal(ours[0], ours[1])  # the op returns the updated var
    rtol = {"float32": 1e-6, "float64": 1e-14, "float16": 2e-3}[dtype]
    for a, b in zip(ours[1:], stock[1:]):
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=rtol)


def _buffer_address(v: tf.Variable) -> int:
    return v.read_value().numpy().__array_interface__["data"][0]  # an eager CPU tensor's numpy() shares its buffer


def test_updates_in_place_and_copy_on_write():
    var = tf.Variable(np.arange(64, dtype=np.float32) - 20.0)
    m = tf.Variable(np.zeros(64, np.float32))
    g = tf.constant(np.linspace(-1, 1, 64, dtype=np.float32))
    # The first update may copy: the variable's buffer can still be shared with its initial value.
    tf_plugin.raw_ops.ResourceApplyPowerSign(var=var, m=m, lr=0.1, logbase=1.0, sign_decay=1.0, beta=0.9, grad=g)
    gc.collect()
    addr = _buffer_address(var)
    gc.collect()  # drop the reader used to take the address
    tf_plugin.raw_ops.ResourceApplyPowerSign(var=var, m=m, lr=0.1, logbase=1.0, sign_decay=1.0, beta=0.9, grad=g)
    assert _buffer_address(var) == addr  # nothing else held the buffer: updated in place
    before = var.read_value()  # holds the buffer: the update must copy, not overwrite it
    snapshot = before.numpy().copy()
    tf_plugin.raw_ops.ResourceApplyPowerSign(var=var, m=m, lr=0.1, logbase=1.0, sign_decay=1.0, beta=0.9, grad=g)
    np.testing.assert_array_equal(before.numpy(), snapshot)
    assert not np.array_equal(var.numpy(), snapshot)


def test_concurrent_updates_equal_serial():
    rng = np.random.default_rng(11)
    var0, m0, g = (random_tensor(rng, (50_000,), "float32") for _ in range(3))
    threads, per_thread = 6, 5

    def run(concurrent: bool):
        var, m = tf.Variable(var0), tf.Variable(m0)
        grad = tf.constant(g)

        def work():
            for _ in range(per_thread):
                tf_plugin.raw_ops.ResourceApplyPowerSign(
                    var=var, m=m, lr=0.01, logbase=1.0, sign_decay=0.5, beta=0.9, grad=grad
                )

        run_concurrently_or_serially(work, threads, concurrent)
        return var.numpy(), m.numpy()

    for a, b in zip(run(True), run(False)):
        np.testing.assert_array_equal(a, b)


def _fresh():
    return tf.Variable(np.array([1.0, -2.0, 3.0], np.float32)), tf.Variable(np.array([0.5, 0.0, -1.0], np.float32))


OK = {"lr": 0.1, "logbase": 1.0, "sign_decay": 0.5, "beta": 0.9}
BAD_CASES = {
    "grad shape": ({"grad": np.ones(4, np.float32)}, "var and grad do not have the same shape"),
    "lr shape": ({"lr": np.ones(2, np.float32)}, "lr is not a scalar"),
    "sign_decay shape": ({"sign_decay": np.ones(2, np.float32)}, "sign_decay is not a scalar"),
    "sign_decay [1,1]": ({"sign_decay": np.ones((1, 1), np.float32)}, "sign_decay is not a scalar"),
    "beta shape": ({"beta": np.ones((2, 2), np.float32)}, "beta is not a scalar"),
    "grad dtype": ({"grad": np.ones(3, np.float64)}, "var is a variable of dtype float"),
    "lr dtype": ({"lr": tf.constant(0.1, tf.float64)}, "lr has dtype float64"),
    "int grad": ({"grad": np.ones(3, np.int32)}, "grad has dtype int32"),
}


@pytest.mark.parametrize("case", BAD_CASES, ids=str)
def test_bad_input_raises_and_leaves_variables(case):
    override, message = BAD_CASES[case]
    var, m = _fresh()
    before = var.numpy(), m.numpy()
    args = {**OK, "grad": np.ones(3, np.float32), **override}
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        tf_plugin.raw_ops.ResourceApplyPowerSign(var=var.handle, m=m.handle, **args)
    np.testing.assert_array_equal(var.numpy(), before[0])
    np.testing.assert_array_equal(m.numpy(), before[1])


def test_m_shape_mismatch():
    var, _ = _fresh()
    m = tf.Variable(np.zeros(4, np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="var and m do not have the same shape"):
        tf_plugin.raw_ops.ResourceApplyPowerSign(var=var, m=m, grad=np.ones(3, np.float32), **OK)
    np.testing.assert_array_equal(m.numpy(), np.zeros(4))


def test_uninitialized_variable_is_failed_precondition():
    var, _ = _fresh()
    handle = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[3], shared_name="never_assigned_m")
    with pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized"):
        tf_plugin.raw_ops.ResourceApplyPowerSign(var=var.handle, m=handle, grad=np.ones(3, np.float32), **OK)
    np.testing.assert_array_equal(var.numpy(), [1.0, -2.0, 3.0])


def test_shape_function_rejects_at_graph_build():
    @tf.function
    def f(var, m):
        tf_plugin.raw_ops.ResourceApplyPowerSign(
            var=var, m=m, grad=tf.ones([3]), lr=0.1, logbase=1.0, sign_decay=tf.ones([2]), beta=0.9
        )

    var, m = _fresh()
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match="sign_decay"):
        f(var.handle, m.handle)


def test_nan_and_inf_propagate_like_stock():
    var0 = np.array([1.0, 1.0, 1.0, np.inf, 2.0], np.float32)
    m0 = np.array([np.nan, 1.0, 0.0, 1.0, 1.0], np.float32)
    g = np.array([0.1, np.nan, 0.0, 0.1, np.inf], np.float32)
    h = {"lr": 0.1, "logbase": 1.0, "sign_decay": 1.0, "beta": 0.9}
    ours = run_resource(tf_plugin.raw_ops.ResourceApplyPowerSign, var0, m0, [g], h, "float32")
    stock = run_resource(tf.raw_ops.ResourceApplyPowerSign, var0, m0, [g], h, "float32")
    for a, b in zip(ours, stock):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("logbase", [200.0, -200.0, np.inf, np.nan], ids=["pos-inf", "neg-inf", "inf", "nan"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_non_finite_scales_match_stock(dtype, logbase):
    """exp(logbase * sign_decay) overflowing (or NaN): a zero grad must still see exp(0 * k), as in stock."""
    rng = np.random.default_rng(17)
    var0, m0 = random_tensor(rng, (257,), dtype), random_tensor(rng, (257,), dtype)
    g = random_tensor(rng, (257,), dtype)
    g[::5] = 0.0
    m0[1::7] = 0.0
    h = {"lr": 0.01, "logbase": logbase, "sign_decay": 1.0 if dtype == "float32" else 4.0, "beta": 0.5}
    ours = run_resource(tf_plugin.raw_ops.ResourceApplyPowerSign, var0, m0, [g], h, dtype)
    stock = run_resource(tf.raw_ops.ResourceApplyPowerSign, var0, m0, [g], h, dtype)
    for a, b in zip(ours, stock):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        np.testing.assert_allclose(a[~np.isnan(a)], b[~np.isnan(b)], rtol=1e-6)
