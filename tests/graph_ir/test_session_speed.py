"""What the Session does for speed keeps its results: one BLAS thread during a run (restored after), snapshots that
stay views only where no in-place write can reach them, and 1x1 convolutions as one matrix product (TF's values,
NaN and inf included)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import ops
from graph_ir.executors import blas
from tests.helpers.train_steps import scaled_difference

PRODUCT = 1e-5


@pytest.mark.skipif(blas._FUNCTIONS is None, reason="NumPy without its bundled OpenBLAS")
def test_blas_threads_are_set_for_a_run_and_restored_after():
    setter, getter = blas._FUNCTIONS
    original = getter()
    setter(2)
    seen = []
    barrier = threading.Barrier(2)

    def inside():
        with blas.blas_threads(1):
            barrier.wait()
            seen.append(getter())
            barrier.wait()

    threads = [threading.Thread(target=inside) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [1, 1] and getter() == 2  # both blocks saw 1; the last to close restored 2
    with blas.blas_threads(None):
        assert getter() == 2
    setter(original)


def test_blas_threads_argument_is_checked():
    for bad in (0, -1, 1.5, "1"):
        with pytest.raises(TypeError, match="blas_threads must be an int >= 1 or None"):
            graph_ir.Session(blas_threads=bad)


def test_a_snapshot_read_after_a_write_keeps_the_value_before_it():
    """Identity(var) -> Reshape, read only after AssignAdd wrote var: the snapshot must have copied (through the
    view), while a snapshot read before the write stays a view; both give the values of before the write."""
    graph = graph_ir.Graph("late reader")
    with graph:
        var = graph_ir.Variable("w", np.arange(6, dtype=np.float32))
        early, late = ops.Identity(var), ops.Identity(var)
        doubled = ops.Mul(early, graph_ir.Const(np.float32(2)))
        bump = ops.AssignAdd(var, graph_ir.Const(np.full(6, 10, np.float32)), control_inputs=[doubled, late])
        later = ops.Reshape(late, graph_ir.Const(np.array([2, 3], np.int32)))
        after = ops.Add(later, graph_ir.Const(np.float32(0)), control_inputs=[bump])
        graph.set_outputs([doubled, after, bump])
    session = graph_ir.Session()
    session.add_graph(0, graph)
    plan = next(iter(session._plans.values()))
    assert (late.node.name, 0) in plan.snapshot and (early.node.name, 0) not in plan.snapshot
    for step in range(2):
        doubled_value, after_value, bumped = session.run_graph(0, [])
        before = np.arange(6, dtype=np.float32) + 10 * step
        np.testing.assert_array_equal(doubled_value, 2 * before)
        np.testing.assert_array_equal(after_value, before.reshape(2, 3))
        np.testing.assert_array_equal(bumped, before + 10)


def _pointwise_steps():
    conv = tf.function(lambda x, f: tf.nn.conv2d(x, f, 1, "VALID"))
    filter_grad = tf.function(lambda x, dy: tf.raw_ops.Conv2DBackpropFilter(
        input=x, filter_sizes=[1, 1, 5, 3], out_backprop=dy, strides=[1, 1, 1, 1], padding="SAME"))
    input_grad = tf.function(lambda f, dy: tf.raw_ops.Conv2DBackpropInput(
        input_sizes=[2, 4, 3, 5], filter=f, out_backprop=dy, strides=[1, 1, 1, 1], padding="VALID"))
    return [(conv, [(2, 4, 3, 5), (1, 1, 5, 3)]), (filter_grad, [(2, 4, 3, 5), (2, 4, 3, 3)]),
            (input_grad, [(1, 1, 5, 3), (2, 4, 3, 3)])]


@pytest.mark.parametrize("k", range(3))
def test_pointwise_convolutions_match_tensorflow_with_nan_and_inf(k):
    step, shapes = _pointwise_steps()[k]
    rng = np.random.default_rng(k)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    inputs[0].reshape(-1)[::4] = 0
    graph = graph_ir.from_tensorflow(step, *[tf.TensorSpec(s, tf.float32) for s in shapes])
    session = graph_ir.Session()
    session.add_graph(0, graph)
    assert scaled_difference(session.run_graph(0, inputs)[0], step(*inputs).numpy()) <= PRODUCT
    inputs[0].reshape(-1)[1], inputs[1].reshape(-1)[2] = np.nan, np.inf
    got, want = session.run_graph(0, inputs)[0], step(*inputs).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))


_RSS_PROBE = """
import sys
import numpy as np
import graph_ir
from graph_ir import ops

def peak_growth(run):
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    status = lambda field: next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(field + ":"))
    before = status("VmRSS")
    run()
    return (status("VmHWM") - before) / 1024

graph = graph_ir.Graph("big temporaries")
with graph:
    x = graph_ir.Data(0, "float32", (12, 2**20))  # 48 MiB: above glibc's largest default mmap threshold
    graph.set_outputs([ops.ReduceSum(ops.Mul(ops.Add(x, x), x), graph_ir.Const(np.array([0, 1], np.int32)),
                                     keep_dims=False)])
session = graph_ir.Session(keep_memory=sys.argv[1] == "keep")
session.add_graph(0, graph)
feed = [np.ones((12, 2**20), np.float32)]
for _ in range(2):
    session.run_graph(0, feed)
print(max(peak_growth(lambda: session.run_graph(0, feed)) for _ in range(3)))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux's /proc/self/clear_refs")
def test_keep_memory_reuses_a_runs_large_buffers_instead_of_fresh_pages():
    """Each run of this graph frees and allocates 48 MiB buffers (the fed copy, the sum, the product). With
    keep_memory (the default) a warm run takes no new pages; without it every run faults in fresh ones."""
    growth = {}
    for mode in ("keep", "return"):
        done = subprocess.run([sys.executable, "-c", _RSS_PROBE, mode], capture_output=True, text=True, timeout=120,
                              check=True)
        growth[mode] = float(done.stdout.split()[-1])
    assert growth["keep"] < 8 and growth["return"] > 40, growth


def test_keep_memory_argument_is_checked():
    with pytest.raises(TypeError, match="keep_memory must be a bool, got 1"):
        graph_ir.Session(keep_memory=1)
