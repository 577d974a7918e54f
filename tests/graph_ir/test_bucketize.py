"""Bucketize (graph_ir/opset/bucketize.py) against tf.raw_ops.Bucketize, bitwise: every input dtype, values on,
between, below and above the boundaries, NaN, +-inf, -0.0, large integers that float32 rounds, through .air; a list
of floats as an attribute read back exactly; unsorted boundaries refused as TF refuses them."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import ops

TESTED = ("Bucketize",)  # bitwise (tests/graph_ir/test_family_ops.py PER_OP_TESTS)
BOUNDARIES = [-1.5, 0.0, 2.5, 10.0, 100.0, 2.0**24 + 1]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_bucketize_as_tf(dtype, tmp_path):
    rng = np.random.default_rng(91)
    x = np.concatenate([rng.uniform(-20, 200, 37), BOUNDARIES, [-5, 1e4, 2.0**24 + 1, 2.0**24 + 3, 7]])
    if dtype.startswith("float"):
        x = np.concatenate([x, [np.nan, np.inf, -np.inf, -0.0]])
    x = x.astype(dtype)
    fn = tf.function(lambda x: tf.raw_ops.Bucketize(input=x, boundaries=BOUNDARIES))
    graph = graph_ir.from_tensorflow(fn, tf.TensorSpec(x.shape, tf.as_dtype(dtype)))
    path = str(tmp_path / "b.air")
    graph.save(path)
    loaded = graph_ir.load(path)
    assert loaded.nodes_of_type("Bucketize")[0].attrs["boundaries"] == [float(np.float32(b)) for b in BOUNDARIES]
    session = graph_ir.Session()
    session.add_graph(0, loaded)
    (got,) = session.run_graph(0, [x])
    want = fn(x).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_unsorted_boundaries_are_refused_as_tf_refuses_them():
    x = np.zeros(3, np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.raw_ops.Bucketize(input=x, boundaries=[1.0, 0.0])
    graph = graph_ir.Graph("g")
    with graph, pytest.raises(graph_ir.GraphError, match="Bucketize 'b': attribute 'boundaries' must be sorted"):
        ops.Bucketize(graph_ir.Const(x), boundaries=[1.0, 0.0], name="b")
    with graph, pytest.raises(graph_ir.GraphError, match="attribute 'boundaries' must be a list of floats"):
        ops.Bucketize(graph_ir.Const(x), boundaries="0.5", name="b")


def test_a_file_with_boundaries_of_another_kind_is_refused():
    graph = graph_ir.Graph("g")
    with graph:
        graph.set_outputs([ops.Bucketize(graph_ir.Const(np.zeros(3, np.float32)), boundaries=[0.5], name="b")])
    model = graph.to_model_def()
    (op,) = [o for o in model.graph[0].op if o.type == "Bucketize"]
    op.attr["boundaries"].list.ClearField("f")
    op.attr["boundaries"].list.i.extend([1, 2])
    with pytest.raises(graph_ir.GraphError, match="node 'b': attribute 'boundaries' must be a list of floats"):
        graph_ir.loads(model.SerializeToString())
