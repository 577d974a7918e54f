"""TF's Tile on bool (GE's Tile REG_OP takes no bool: lowered as Cast to uint8, Tile, Cast back) and GatherV2 with
batch_dims (GE's GatherV2 REG_OP attr; the executor gathers per batch as TF's gather_op.cc does), each lowered
alone and compared bitwise with TensorFlow; batch_dims TF would refuse are refused naming the node and the attr."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import tensorflow as tf

import graph_ir


def _bools(rng, *shape):
    return rng.random(shape) < 0.5


def _floats(rng, *shape):
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[::5] = 0
    return x


def _indices(size: int):
    """Indices below `size`, repeats and both ends included."""
    return lambda rng, *shape: rng.integers(0, size, shape).astype(np.int32)


def _gather(axis: int, batch_dims: int):
    return lambda x, i: tf.gather(x, i, axis=axis, batch_dims=batch_dims)


# name -> (TF function, inputs from a rng, tolerance); the name's first part is the TF op (docs/lowering.md's table row)
CASES = {
    "Tile-bool": (lambda x: tf.tile(x, [2, 3]), lambda r: [_bools(r, 2, 3)], 0),
    "Tile-bool-3d-zero-multiple": (lambda x: tf.tile(x, [1, 0, 2]), lambda r: [_bools(r, 3, 2, 4)], 0),
    "Tile-bool-empty": (lambda x: tf.tile(x, [3, 2]), lambda r: [_bools(r, 0, 5)], 0),
    "GatherV2-batch1": (_gather(1, 1), lambda r: [_floats(r, 3, 5), _indices(5)(r, 3, 4)], 0),
    "GatherV2-batch1-axis2": (_gather(2, 1), lambda r: [_floats(r, 2, 3, 4, 2), _indices(4)(r, 2, 3, 2)], 0),
    "GatherV2-batch2": (_gather(2, 2), lambda r: [_floats(r, 2, 3, 6, 2), _indices(6)(r, 2, 3, 5)], 0),
    "GatherV2-batch-negative": (_gather(1, -1), lambda r: [_floats(r, 4, 7), _indices(7)(r, 4, 3)], 0),
    "GatherV2-batch1-int64": (_gather(1, 1), lambda r: [r.integers(-9, 9, (3, 6)), _indices(6)(r, 3, 2, 2)], 0),
    "GatherV2-batch1-empty": (_gather(1, 1), lambda r: [_floats(r, 0, 5), _indices(5)(r, 0, 3)], 0),
    # Known indices (a reduction's gradient over unknown dims stitches its shape so), later ones winning, rows of 2
    "DynamicStitch-rows": (lambda a, b: tf.raw_ops.DynamicStitch(indices=[[0, 2, 4], [[1, 2], [3, 0]]], data=[a, b]),
                           lambda r: [_floats(r, 3, 2), _floats(r, 2, 2, 2)], 0),
    "DynamicStitch-scalars": (lambda a, b: tf.raw_ops.DynamicStitch(indices=[2, [0, 1]], data=[a, b]),
                              lambda r: [_floats(r), _floats(r, 2)], 0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_lowered_op_runs_like_tensorflow(name):
    fn, make_inputs, _ = CASES[name]
    inputs = make_inputs(np.random.default_rng(zlib.crc32(name.encode())))
    step = tf.function(fn)
    graph = graph_ir.from_tensorflow(step, *[tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)) for x in inputs])
    types = [n.type for n in graph.nodes.values()]
    if name.startswith("Tile"):
        assert "Tile" in types and types.count("Cast") == 2
    session = graph_ir.Session()
    session.add_graph(0, graph)
    (got,) = session.run_graph(0, inputs)
    want = step(*inputs).numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_dynamic_stitch_refuses_indices_it_cannot_know_or_that_leave_holes():
    """The indices must be known when lowering (shape plumbing), and cover every output position (TF leaves holes
    uninitialized)."""
    computed = tf.function(lambda i, a: tf.raw_ops.DynamicStitch(indices=[i], data=[a]))
    with pytest.raises(graph_ir.LoweringError, match=r"DynamicStitch .*computed from the step's data"):
        graph_ir.from_tensorflow(computed, tf.TensorSpec((3,), tf.int32), tf.TensorSpec((3,), tf.float32))
    holes = tf.function(lambda a: tf.raw_ops.DynamicStitch(indices=[[0, 2]], data=[a]))
    with pytest.raises(graph_ir.LoweringError, match=r"DynamicStitch .*leave output positions unset"):
        graph_ir.from_tensorflow(holes, tf.TensorSpec((2,), tf.float32))


def test_a_gather_index_out_of_its_batch_range_is_an_error_as_in_tensorflow():
    step = tf.function(_gather(1, 1))
    x, i = np.zeros((2, 3), np.float32), np.array([[0, 2], [1, 3]], np.int32)
    with pytest.raises(tf.errors.InvalidArgumentError):
        step(x, i)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.from_tensorflow(step, tf.TensorSpec(x.shape), tf.TensorSpec(i.shape, tf.int32)))
    with pytest.raises(graph_ir.GraphError, match=r"GatherV2 .*indices\[3\] = 3 is not in \[0, 3\)"):
        session.run_graph(0, [x, i])


@pytest.mark.parametrize("x_shape, i_shape, axis, batch_dims", [
    ((3, 5), (3, 2), 0, 1),  # batch_dims above axis
    ((3, 5), (4, 2), 1, 1),  # batch axes that differ
    ((3, 5, 2), (3, 2), 2, 3),  # batch_dims above indices' rank
])
def test_batch_dims_tensorflow_refuses_are_refused_naming_the_node_and_attr(x_shape, i_shape, axis, batch_dims):
    graph = graph_ir.Graph("bad")
    with graph, pytest.raises(graph_ir.GraphError, match=rf"GatherV2 'gather': batch_dims {batch_dims} for x"):
        graph.add_node("GatherV2", [graph_ir.Data(0, "float32", x_shape), graph_ir.Data(1, "int32", i_shape),
                                    graph_ir.Const(np.array(axis, np.int32))], {"batch_dims": batch_dims},
                       name="gather")
