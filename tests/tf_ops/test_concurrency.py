"""Concurrency: many threads updating the same variables, with use_locking true and false, mixed with readers.
Results equal a serial order, no reader sees a torn (half-updated) value, and everything finishes in bounded time."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import tensorflow as tf

import tf_plugin
from tests.helpers.threads import TIMEOUT, run_threads

THREADS, UPDATES, N = 6, 8, 200_003  # large enough that the kernel shards over the pool


def _power_sign_states(var0, m0, grad, count):
    """The serial states: with one grad for every update, any order of the updates gives these, in turn."""
    var, m = tf.Variable(var0), tf.Variable(m0)
    states = [var0.copy()]
    for _ in range(count):
        tf_plugin.raw_ops.ResourceApplyPowerSign(var=var, m=m, lr=0.01, logbase=1.0, sign_decay=0.5, beta=0.9,
                                                 grad=grad)
        states.append(var.numpy())
    return states, m.numpy()


@pytest.mark.parametrize("use_locking", [True, False])
def test_power_sign_writers_and_readers(use_locking):
    rng = np.random.default_rng(1)
    var0, m0 = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    grad = tf.constant(rng.standard_normal(N).astype(np.float32))
    states, final_m = _power_sign_states(var0, m0, grad, THREADS * UPDATES)
    var, m = tf.Variable(var0), tf.Variable(m0)
    update = tf.function(lambda: tf_plugin.raw_ops.ResourceApplyPowerSign(
        var=var, m=m, lr=0.01, logbase=1.0, sign_decay=0.5, beta=0.9, grad=grad, use_locking=use_locking) and None)
    seen, errors, done = [], [], threading.Event()
    known = {s.tobytes(): k for k, s in enumerate(states)}

    def writer():
        try:
            for _ in range(UPDATES):
                update()
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    def reader():
        while not done.is_set():
            seen.append(var.read_value().numpy().tobytes())

    readers = [threading.Thread(target=reader, daemon=True) for _ in range(2)]
    for r in readers:
        r.start()
    run_threads([writer] * THREADS)
    done.set()
    for r in readers:
        r.join(TIMEOUT)
    assert not errors
    np.testing.assert_array_equal(var.numpy(), states[-1])  # the same as 48 serial updates
    np.testing.assert_array_equal(m.numpy(), final_m)
    torn = [s for s in seen if s not in known]
    assert not torn, f"{len(torn)} of {len(seen)} reads saw a half-updated variable"
    assert len(seen) > 0


@pytest.mark.parametrize("use_locking", [True, False])
def test_fused_ema_adam_concurrent_equals_serial(use_locking):
    rng = np.random.default_rng(2)
    init = [rng.standard_normal(N).astype(np.float32) for _ in range(4)]
    init[2] = np.abs(init[2])
    grad = tf.constant(rng.standard_normal(N).astype(np.float32))
    step = tf.constant(3, tf.int64)  # one step value: every order of the updates is the same serial sequence

    def make():
        vs = [tf.Variable(x) for x in init]
        return vs, tf.function(lambda: tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(
            var=vs[0], m=vs[1], v=vs[2], s=vs[3], grad=grad, step=step, lr=0.001, use_locking=use_locking) and None)

    serial, serial_update = make()
    for _ in range(THREADS * UPDATES):
        serial_update()
    shared, shared_update = make()
    errors = []

    def writer():
        try:
            for _ in range(UPDATES):
                shared_update()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    run_threads([writer] * THREADS)
    assert not errors
    for a, b in zip(shared, serial):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_ref_variables_concurrent_sessions_runs():
    """TF1 ref variables with use_locking: concurrent Session.run calls equal serial runs."""
    rng = np.random.default_rng(3)
    var0 = rng.standard_normal(N).astype(np.float32)
    grad_np = rng.standard_normal(N).astype(np.float32)
    results = []
    for concurrent in (False, True):
        with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
            var = tf.compat.v1.Variable(var0, use_resource=False)
            m = tf.compat.v1.Variable(np.zeros(N, np.float32), use_resource=False)
            op = tf_plugin.raw_ops.ApplyPowerSign(var=var, m=m, lr=0.01, logbase=1.0, sign_decay=0.5, beta=0.9,
                                                  grad=tf.constant(grad_np), use_locking=True)
            sess.run(tf.compat.v1.global_variables_initializer())
            if concurrent:
                def run_updates(op=op, sess=sess):
                    for _ in range(UPDATES):
                        sess.run(op.op)

                run_threads([run_updates] * THREADS)
            else:
                for _ in range(THREADS * UPDATES):
                    sess.run(op.op)
            results.append(sess.run(var))
    np.testing.assert_array_equal(results[0], results[1])
