"""Large outputs that TF computes and graph_ir's planner once refused (issue 38): AvgPoolGrad of a 5000x5000 VALID
window (its workspace counted a float64 copy of the whole result) and Conv2DBackpropInput of a 4000x4000 output by a
filter of nearly its size (the direct convolution's packed filter was counted though that way is not taken, and
16 million per-tap products would have taken minutes: it goes output by output). Compared with tf.raw_ops, the run's
allocations within what the planner states."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import ops
from tests.graph_ir.test_family_ops import PRODUCT
from tests.helpers.hostile_graphs import ints, planned_bytes, run_measured
from tests.helpers.train_steps import scaled_difference

pytestmark = pytest.mark.slow


def _run_within_plan(build, inputs) -> np.ndarray:
    """Builds build(*Data handles), saves and loads it, runs it: its output, after checking that the run allocated
    no more than the planner states (which the default Session bound admits)."""
    graph = graph_ir.Graph("large")
    with graph:
        graph.set_outputs([build(*[graph_ir.Data(k, str(a.dtype), a.shape) for k, a in enumerate(inputs)])])
    graph = graph_ir.loads(graph.to_model_def().SerializeToString())
    planned = planned_bytes(graph)
    (got,), peak, _ = run_measured(graph, inputs)
    assert peak <= planned + 64 * 1024, (peak, planned)
    return got


def test_avg_pool_grad_of_a_5000x5000_valid_window():
    rng = np.random.default_rng(38)
    dy = np.round(rng.standard_normal((1, 2, 3, 1)) * 4).astype(np.float32)
    dy[0, 1, 0, 0] = 0
    geometry = {"ksize": [1, 5000, 5000, 1], "strides": [1, 1, 1, 1], "padding": "VALID"}
    got = _run_within_plan(lambda dy: ops.AvgPoolGrad(ints(1, 5001, 5002, 1), dy, **geometry), [dy])
    want = tf.raw_ops.AvgPoolGrad(orig_input_shape=[1, 5001, 5002, 1], grad=dy, **geometry).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)


def test_conv2d_backprop_input_of_a_4000x4000_output_by_a_filter_of_nearly_its_size():
    rng = np.random.default_rng(39)
    f = rng.standard_normal((3999, 3998, 1, 2)).astype(np.float32)
    f.reshape(-1)[::7] = 0
    dy = rng.standard_normal((1, 2, 3, 2)).astype(np.float32)
    geometry = {"strides": [1, 1, 1, 1], "pads": [0, 0, 0, 0]}
    got = _run_within_plan(lambda f, dy: ops.Conv2DBackpropInput(ints(1, 4000, 4000, 1), f, dy, **geometry), [f, dy])
    want = tf.raw_ops.Conv2DBackpropInput(input_sizes=[1, 4000, 4000, 1], filter=f, out_backprop=dy,
                                          strides=[1, 1, 1, 1], padding="VALID").numpy()
    assert scaled_difference(got, want) <= PRODUCT
