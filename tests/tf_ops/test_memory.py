"""Memory: an update of a 1 GiB variable grows peak RSS by much less than a copy of it (in place, no copy-on-write
copy when nothing else holds the buffer); and, where memory allows, a real update of more than 2^31 elements.
Both are heavy: marked slow. (Indexing past 2^31 is tested cheaply in kernels/tests/kernels_test.cc.)"""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

import tf_plugin

GIB = 1 << 30


def _peak_rss_reset() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM, the peak resident set size
        return True
    except OSError:
        return False


def _peak_rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


def _available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc")
def test_update_of_a_1gib_variable_makes_no_copy():
    n = GIB // 4
    var = tf.Variable(tf.ones([n]))
    m = tf.Variable(tf.zeros([n]))
    grad = tf.fill([n], 0.5)
    tf_plugin.raw_ops.ResourceApplyPowerSign(var=var, m=m, lr=0.1, logbase=1.0, sign_decay=1.0, beta=0.9, grad=grad)
    assert _peak_rss_reset()
    base = _peak_rss()
    for _ in range(3):
        tf_plugin.raw_ops.ResourceApplyPowerSign(var=var, m=m, lr=0.1, logbase=1.0, sign_decay=1.0, beta=0.9,
                                                 grad=grad)
    growth = _peak_rss() - base
    assert growth < GIB // 8, f"peak RSS grew by {growth / GIB:.2f} GiB: a copy of the variable?"
    # Four steps, signs agreeing each time (m and grad positive): var = 1 - 4 * lr * e * grad.
    assert abs(float(var[12345]) - (1.0 - 4 * 0.1 * np.e * 0.5)) < 1e-4


@pytest.mark.slow
@pytest.mark.skipif(_available() < 20 * GIB, reason="needs ~14 GiB free for 2^31 + 1000 float16 elements x 3")
def test_more_than_2_31_elements_for_real():
    n = (1 << 31) + 1000
    var = tf.Variable(tf.zeros([n], tf.float16))
    m = tf.Variable(tf.zeros([n], tf.float16))
    grad = tf.fill([n], tf.constant(1.0, tf.float16))
    tf_plugin.raw_ops.ResourceApplyPowerSign(var=var, m=m, lr=tf.constant(0.5, tf.float16),
                                             logbase=tf.constant(0.0, tf.float16),
                                             sign_decay=tf.constant(1.0, tf.float16),
                                             beta=tf.constant(0.0, tf.float16), grad=grad)
    tail = var[n - 1500:].numpy()  # elements past index 2^31 were updated too
    np.testing.assert_array_equal(tail, np.full(1500, -0.5, np.float16))
