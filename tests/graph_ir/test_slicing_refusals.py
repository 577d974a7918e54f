"""The slicing and resize families' refusals: the inputs and graphs TensorFlow refuses (run eagerly beside the same
GE node), or that graph_ir cannot run statically (shapes computed in the step), refused naming the node and the field
or input; bad indices fed at run time are errors as in TensorFlow. The ops against TensorFlow:
tests/graph_ir/test_slicing_ops.py."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import graph_ir


def _i32(value):
    return graph_ir.Const(np.array(value, np.int32))


# name -> (x's shape, what TF runs eagerly, the same GE node built on x, the refusal graph_ir gives)
BAD_NODES = {
    "negative padding": ((4, 3), lambda x: tf.pad(x, [[-1, 0], [0, 0]]),
                         lambda x: graph_ir.ops.Pad(x, _i32([[-1, 0], [0, 0]]), name="pad"),
                         r"Pad 'pad': paddings must be >= 0 .*\[\(-1, 0\), \(0, 0\)\]"),
    "REFLECT padding of a whole dim": ((4, 3), lambda x: tf.pad(x, [[4, 0], [0, 0]], "REFLECT"),
                                       lambda x: graph_ir.ops.MirrorPad(x, _i32([[4, 0], [0, 0]]), mode="REFLECT",
                                                                        name="mp"),
                                       r"MirrorPad 'mp': paddings\[0\] = \[4, 0\] must be <= 3 in REFLECT mode"),
    "SYMMETRIC padding beyond a dim": ((4, 3), lambda x: tf.pad(x, [[0, 0], [0, 4]], "SYMMETRIC"),
                                       lambda x: graph_ir.ops.MirrorPad(x, _i32([[0, 0], [0, 4]]), mode="SYMMETRIC",
                                                                        name="mp"),
                                       r"MirrorPad 'mp': paddings\[1\] = \[0, 4\] must be <= 3 in SYMMETRIC mode"),
    "slice past the end": ((4, 3), lambda x: tf.slice(x, [1, 1], [4, 1]),
                           lambda x: graph_ir.ops.Slice(x, _i32([1, 1]), _i32([4, 1]), name="s"),
                           r"Slice 's': offsets\[0\] = 1 and size\[0\] = 4 do not fit dim 0 of x, which is 4"),
    "uneven split": ((4, 3), lambda x: tf.split(x, 2, axis=1),
                     lambda x: graph_ir.ops.Split(_i32(1), x, num_split=2, name="split"),
                     r"Split 'split': dim 1 of x \(3\) does not split into num_split 2"),
    "split sizes not adding up": ((4, 3), lambda x: tf.split(x, [1, 1], axis=0),
                                  lambda x: graph_ir.ops.SplitV(x, _i32([1, 1]), _i32(0), num_split=2, name="split"),
                                  r"SplitV 'split': size_splits \[1, 1\] must be .* adding up to 4"),
    "axis twice": ((4, 3), lambda x: tf.reverse(x, [1, -1]),
                   lambda x: graph_ir.ops.ReverseV2(x, _i32([1, -1]), name="rev"),
                   r"ReverseV2 'rev': axis \[1, -1\] names an axis twice"),
    "align_corners with half_pixel_centers": (
        (1, 3, 4, 2), lambda x: tf.raw_ops.ResizeBilinear(images=x, size=[6, 8], align_corners=True,
                                                          half_pixel_centers=True),
        lambda x: graph_ir.ops.ResizeBilinearV2(x, _i32([6, 8]), align_corners=True, half_pixel_centers=True,
                                                name="rb"),
        r"ResizeBilinearV2 'rb': half_pixel_centers requires align_corners false"),
    "crops larger than the space": ((8, 2, 3, 1), lambda x: tf.batch_to_space(x, [2, 2], [[3, 2], [0, 0]]),
                                    lambda x: graph_ir.ops.BatchToSpaceND(x, _i32([2, 2]), _i32([[3, 2], [0, 0]]),
                                                                          name="b2s"),
                                    r"BatchToSpaceND 'b2s': crops\[0\] = \[3, 2\] must be >= 0 and crop at most 4"),
    "space not a multiple of the block": (
        (1, 5, 4, 1), lambda x: tf.space_to_batch_nd(x, [2, 2], [[0, 0], [0, 0]]),
        lambda x: graph_ir.ops.SpaceToBatchND(x, _i32([2, 2]), _i32([[0, 0], [0, 0]]), name="s2b"),
        r"SpaceToBatchND 's2b': paddings\[0\] = \[0, 0\] must be >= 0 and make dim 1 of x \(5\) a multiple"),
    "depth not a multiple of block_size^2": ((1, 2, 2, 6), lambda x: tf.nn.depth_to_space(x, 2),
                                             lambda x: graph_ir.ops.DepthToSpace(x, block_size=2, name="d2s"),
                                             r"DepthToSpace 'd2s': the channels of x \(6\) are not a multiple"),
}


@pytest.mark.parametrize("name", list(BAD_NODES))
def test_what_tensorflow_refuses_graph_ir_refuses_naming_the_node_and_field(name):
    shape, tf_call, build, message = BAD_NODES[name]
    x = np.ones(shape, np.float32)
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
        tf_call(x)
    graph = graph_ir.Graph("bad")
    with graph, pytest.raises(graph_ir.GraphError, match=message):
        build(graph_ir.Data(0, "float32", shape))


@pytest.mark.parametrize("fn, specs, message", [
    (lambda x, p: tf.pad(x, p), [((4, 3), tf.float32), ((2, 2), tf.int32)],
     r"Pad 'Pad'.*paddings are computed in the step and the size of dim 0 of y \(before \+ after\) is not a"),
    (lambda x, p: tf.pad(x, p, "SYMMETRIC"), [((4, 3), tf.float32), ((2, 2), tf.int32)],
     r"MirrorPad 'MirrorPad'.*paddings are computed in the step; graph_ir pads at computed positions only with"),
    (lambda x, s: tf.split(x, s, axis=0), [((4, 3), tf.float32), ((2,), tf.int32)],
     r"SplitV 'split'.*input 'size_splits' must come from a Const"),
    (lambda x, s: tf.slice(x, [0, 0], s), [((4, 3), tf.float32), ((2,), tf.int32)],
     r"Slice 'Slice'.*input 'size' must come from a Const"),
    (lambda x, b: tf.slice(x, b, [2, -1]), [((4, 3), tf.float32), ((2,), tf.int32)],
     r"Slice 'Slice'.*input 'offsets' must come from a Const"),
    (lambda x, s: tf.image.resize(x, s, "bilinear"), [((1, 4, 4, 2), tf.float32), ((2,), tf.int32)],
     r"ResizeBilinearV2 .*input 'size' must come from a Const"),
    (lambda x, a: tf.reverse(x, a), [((4, 3), tf.float32), ((1,), tf.int32)],
     r"ReverseV2 'ReverseV2'.*input 'axis' must come from a Const"),
    (lambda x: tf.nn.depth_to_space(x, 2, data_format="NCHW"), [((1, 8, 2, 2), tf.float32)],
     r"DepthToSpace 'DepthToSpace'.*NHWC .*got data_format 'NCHW'"),
])
def test_shapes_computed_in_the_step_are_refused_naming_the_node_and_input(fn, specs, message):
    with pytest.raises(graph_ir.LoweringError, match=message):
        graph_ir.from_tensorflow(tf.function(fn), *[tf.TensorSpec(s, d) for s, d in specs])


@pytest.mark.parametrize("fn, inputs, message", [
    (tf.gather_nd, [np.ones((3, 4), np.float32), np.array([[1, 4]], np.int32)],
     r"GatherNd 'GatherNd': indices\[0\] = \[1, 4\] does not index into x of shape \[3, 4\]"),
    (tf.gather_nd, [np.ones((0, 4), np.float32), np.array([[0]], np.int32)], r"GatherNd 'GatherNd': "),
    (lambda i, u: tf.scatter_nd(i, u, [3]), [np.array([[0], [-1]], np.int32), np.ones(2, np.float32)],
     r"ScatterNd 'ScatterNd': indices\[1\] = \[-1\] does not index into shape of shape \[3\]"),
    (lambda x, b: tf.slice(x, b, [2, 2]), [np.ones((4, 3), np.float32), np.array([1, 2], np.int32)],
     r"Slice 'Slice': offsets\[1\] = 2 and size\[1\] = 2 do not fit dim 1 of x, which is 3"),
    (tf.math.invert_permutation, [np.array([0, 2, 2], np.int32)],
     r"InvertPermutation 'InvertPermutation': x \[0, 2, 2\] is not a permutation of 0..2"),
])
def test_bad_indices_fed_at_run_time_are_errors_as_in_tensorflow(fn, inputs, message):
    step = tf.function(fn)
    with pytest.raises(tf.errors.InvalidArgumentError):
        step(*inputs)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.from_tensorflow(step, *[tf.TensorSpec(x.shape, x.dtype) for x in inputs]))
    with pytest.raises(graph_ir.GraphError, match=message):
        session.run_graph(0, inputs)
