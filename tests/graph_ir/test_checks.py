"""tf.debugging.check_numerics lowered to GE CheckNumerics: a finite tensor passes through bitwise (test_family_ops),
a NaN or infinity stops the run with TF's message, naming the node, before the step's update is written."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import graph_ir

TESTED = ("CheckNumerics", "EnsureShape")  # tests/graph_ir/test_family_ops.py PER_OP_TESTS


@pytest.mark.parametrize("bad,found", [(np.nan, "NaN"), (np.inf, "Inf"), (-np.inf, "Inf")])
def test_check_numerics_stops_the_run_as_tf_does(bad, found):
    var = tf.Variable(np.zeros(5, np.float32))

    @tf.function
    def step(x):
        var.assign_add(tf.debugging.check_numerics(x, "x must be finite"))

    graph = graph_ir.from_tensorflow(step, tf.TensorSpec((5,), tf.float32))
    session = graph_ir.Session()
    session.add_graph(0, graph)
    x = np.array([1, 2, bad, 4, 0], np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"x must be finite : Tensor had {found} values"):
        step(x)
    with pytest.raises(graph_ir.GraphError, match=f"CheckNumerics .*x must be finite : Tensor had {found} values"):
        session.run_graph(0, [x])
    (got,) = session.get_variables([graph.variable_name(var)])
    np.testing.assert_array_equal(got, var.numpy())  # nothing written, in either
    session.run_graph(0, [np.ones(5, np.float32)])
    step(np.ones(5, np.float32))
    np.testing.assert_array_equal(session.get_variables([graph.variable_name(var)])[0], var.numpy())


def test_ensure_shape_is_checked_when_lowering():
    """tf.ensure_shape (Keras's preprocessing layers end with it): an Identity where the static shape agrees (-1 dims
    accept any). TF refuses a static mismatch when tracing; the lowering refuses any it meets, naming the node."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for wanted in ([2, 3], [None, 3], [None, None]):
        step = tf.function(lambda x, wanted=wanted: tf.ensure_shape(x, wanted) * 2)
        graph = graph_ir.from_tensorflow(step, tf.TensorSpec((2, 3)))
        session = graph_ir.Session()
        session.add_graph(0, graph)
        np.testing.assert_array_equal(session.run_graph(0, [x])[0], step(x).numpy())
    with pytest.raises(graph_ir.LoweringError, match=r"Dimension 0 in both shapes must be equal"):  # TF's, tracing
        graph_ir.from_tensorflow(tf.function(lambda x: tf.ensure_shape(x, [3, None])), tf.TensorSpec((2, 3)))
