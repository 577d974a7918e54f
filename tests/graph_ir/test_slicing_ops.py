"""The slicing and resize families' TF ops (graph_ir/lowering/ops/slicing.py, resize.py), each alone in a
tf.function: lowered, run in graph_ir.Session and compared with TensorFlow on fresh random inputs with zeros,
negatives, ties, NaN and -inf, odd sizes, zero-size tensors and limits (MirrorPad's paddings at their largest):
bitwise, bytes included (these ops move data, and the sums keep TF's order), or within docs/lowering.md's tolerance where
stated; other dtypes bitwise, and the dtypes GE's ops do not declare refused. The inputs and graphs TF refuses, or
that graph_ir cannot run statically: tests/graph_ir/test_slicing_refusals.py."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir.lowering import ops
from tests.graph_ir.test_family_ops import _floats
from tests.helpers.train_steps import scaled_difference


def _data(rng, *shape):
    """_floats with NaN and -inf sprinkled in: data movement must carry them bit for bit."""
    if 0 in shape:
        return np.zeros(shape, np.float32)
    x = _floats(rng, *shape)
    flat = x.reshape(-1)
    flat[2::9], flat[4::13] = np.nan, -np.inf
    return x


def _ints(rng, high, *shape, low=0):
    return rng.integers(low, high, shape).astype(np.int32)


def _resize(op, size, align=False, half=False):
    return lambda x: getattr(tf.raw_ops, op)(images=x, size=size, align_corners=align, half_pixel_centers=half)


def _resize_grad(op, align=False, half=False, size=None, original=None):
    if op == "ResizeNearestNeighborGrad":
        return lambda g: tf.raw_ops.ResizeNearestNeighborGrad(grads=g, size=size, align_corners=align,
                                                              half_pixel_centers=half)
    return lambda g, image: tf.raw_ops.ResizeBilinearGrad(grads=g, original_image=image, align_corners=align,
                                                          half_pixel_centers=half)


def _strided_slice_grad(shape, begin, end, strides, **masks):
    return lambda dy: tf.raw_ops.StridedSliceGrad(shape=shape, begin=begin, end=end, strides=strides, dy=dy, **masks)


def _update(begin, end, strides):
    return lambda x, u: tf.raw_ops.TensorStridedSliceUpdate(input=x, begin=begin, end=end, strides=strides, value=u)


def _assign(begin, end, strides, **masks):
    """`var[begin:end:strides].assign(x)` on a Variable (the same x again: TF's value does not depend on the order)."""
    var = tf.Variable(np.arange(30, dtype=np.float32).reshape(6, 5))
    return lambda x: tf.raw_ops.ResourceStridedSliceAssign(ref=var.handle, begin=begin, end=end, strides=strides,
                                                           value=x, **masks) and var.read_value()


# name ("TFOp-variant") -> (function of tensors, inputs from rng, tolerance)
CASES = {
    "Pad": (lambda x: tf.pad(x, [[1, 2], [0, 3]]), lambda r: [_data(r, 4, 5)], 0),
    "Pad-zero-size": (lambda x: tf.pad(x, [[1, 0], [2, 1], [0, 0]]), lambda r: [_data(r, 0, 3, 2)], 0),
    "Pad-int32": (lambda x: tf.pad(x, [[0, 1], [2, 2]]), lambda r: [_ints(r, 9, 3, 4, low=-9)], 0),
    "PadV2": (lambda x: tf.pad(x, [[2, 0], [1, 1], [0, 2]], constant_values=-1.5), lambda r: [_data(r, 3, 1, 4)], 0),
    "MirrorPad-reflect-at-limit": (lambda x: tf.pad(x, [[2, 1], [3, 3]], "REFLECT"), lambda r: [_data(r, 3, 4)], 0),
    "MirrorPad-symmetric-at-limit": (lambda x: tf.pad(x, [[3, 3], [0, 4], [1, 0]], "SYMMETRIC"),
                                     lambda r: [_data(r, 3, 4, 2)], 0),
    "MirrorPadGrad-reflect": (lambda g: tf.raw_ops.MirrorPadGrad(input=g, paddings=[[2, 1], [3, 3]], mode="REFLECT"),
                              lambda r: [_floats(r, 6, 10)], 0),
    "MirrorPadGrad-symmetric": (lambda g: tf.raw_ops.MirrorPadGrad(input=g, paddings=[[3, 3], [0, 4], [1, 1]],
                                                                   mode="SYMMETRIC"),
                                lambda r: [_floats(r, 9, 8, 4)], 0),
    "Slice": (lambda x: tf.slice(x, [1, 0, 2], [2, -1, 3]), lambda r: [_data(r, 4, 3, 6)], 0),
    "Slice-empty-at-the-end": (lambda x: tf.slice(x, [4, 1], [0, 2]), lambda r: [_data(r, 4, 3)], 0),
    "Slice-offsets-computed-in-the-step": (lambda x, b: tf.slice(x, b, [2, 3]),
                                           lambda r: [_data(r, 4, 6), np.array([2, 3], np.int32)], 0),
    "Split": (lambda x: tf.split(x, 3, axis=1), lambda r: [_data(r, 2, 6, 3)], 0),
    "SplitV": (lambda x: tf.split(x, [2, -1, 1], axis=-1), lambda r: [_data(r, 3, 7)], 0),
    "SplitV-zero-part": (lambda x: tf.split(x, [0, 5], axis=0), lambda r: [_data(r, 5, 2)], 0),
    "Unpack": (lambda x: tf.unstack(x, axis=1), lambda r: [_data(r, 2, 3, 5)], 0),
    "ConcatOffset": (lambda x: [tf.cast(o, tf.float32) * x for o in tf.raw_ops.ConcatOffset(
        concat_dim=tf.constant(-2), shape=[tf.constant([2, 3, 4]), tf.constant([2, 5, 4]), tf.constant([2, 0, 4])])],
                     lambda r: [_floats(r, 3)], 0),
    "StridedSliceGrad": (_strided_slice_grad([4, 5, 3], [1, 0, 1], [0, 0, 2], [2, -2, 1], begin_mask=0b010,
                                             end_mask=0b011, shrink_axis_mask=0b100),
                         lambda r: [_data(r, 2, 3)], 0),
    "StridedSliceGrad-ellipsis-new-axis": (_strided_slice_grad([4, 5], [0, 0, 1], [0, 0, 3], [1, 1, 1],
                                                               ellipsis_mask=0b001, new_axis_mask=0b010),
                                           lambda r: [_data(r, 4, 1, 2)], 0),
    "TensorStridedSliceUpdate-strided": (_update([3, 0], [0, 5], [-1, 2]), lambda r: [_data(r, 4, 5), _data(r, 3, 3)], 0),
    "TensorStridedSliceUpdate-empty": (_update([3, 0], [3, 5], [1, 1]), lambda r: [_data(r, 4, 5), _data(r, 2, 2)], 0),
    "ResourceStridedSliceAssign": (_assign([1, 4], [4, 0], [1, -2], shrink_axis_mask=0), lambda r: [_data(r, 3, 2)], 0),
    "InvertPermutation": (tf.math.invert_permutation, lambda r: [r.permutation(9).astype(np.int32)], 0),
    "GatherNd": (tf.gather_nd, lambda r: [_data(r, 4, 5, 3), np.array([[1, 2], [3, 0], [1, 2], [0, 4]], np.int32)],
                 0),
    "GatherNd-full-index": (tf.gather_nd, lambda r: [_data(r, 3, 4), np.array([[[2, 3]], [[0, 0]]], np.int32)], 0),
    "GatherNd-empty-index-tuples": (tf.gather_nd, lambda r: [_data(r, 3, 2), np.zeros((2, 0), np.int32)], 0),
    "GatherNd-no-indices": (tf.gather_nd, lambda r: [_data(r, 3, 4), np.zeros((0, 1), np.int32)], 0),
    "ScatterNd-repeats-add-in-order": (lambda i, u: tf.scatter_nd(i, u, [5, 3]),
                                       lambda r: [np.array([[4], [0], [4], [2], [4]], np.int32), _floats(r, 5, 3)],
                                       0),
    "TensorScatterUpdate": (tf.tensor_scatter_nd_update,
                            lambda r: [_data(r, 4, 3), np.array([[2], [0]], np.int32), _data(r, 2, 3)], 0),
    "TensorScatterUpdate-repeats-last-wins": (tf.tensor_scatter_nd_update,
                                              lambda r: [_data(r, 4, 3), np.array([[2], [0], [2], [2]], np.int32),
                                                         _data(r, 4, 3)], 0),
    "ReverseV2": (lambda x: tf.reverse(x, [0, 2]), lambda r: [_data(r, 3, 4, 5)], 0),
    "ReverseV2-negative-axis-zero-size": (lambda x: tf.reverse(x, [-1]), lambda r: [_data(r, 0, 3)], 0),
    "Cumsum": (lambda x: tf.cumsum(x, axis=1), lambda r: [_data(r, 3, 7, 2)], 0),
    "Cumsum-exclusive-reverse": (lambda x: tf.cumsum(x, axis=0, exclusive=True, reverse=True),
                                 lambda r: [_floats(r, 9, 4)], 0),
    "Cumsum-int32-exclusive": (lambda x: tf.cumsum(x, axis=-1, exclusive=True),
                               lambda r: [_ints(r, 50, 3, 6, low=-50)], 0),
    "ResizeNearestNeighbor-legacy": (_resize("ResizeNearestNeighbor", [7, 5]), lambda r: [_data(r, 2, 3, 4, 2)], 0),
    # (4 - 1) / (7 - 1) = 0.5: source coordinates 0.5, 1.5, 2.5, where roundf goes away from zero
    "ResizeNearestNeighbor-align-corners-ties": (_resize("ResizeNearestNeighbor", [7, 7], align=True),
                                            lambda r: [_data(r, 2, 3, 4, 2)], 0),
    "ResizeNearestNeighbor-half-pixel-down": (_resize("ResizeNearestNeighbor", [2, 3], half=True),
                                              lambda r: [_data(r, 1, 5, 7, 3)], 0),
    "ResizeNearestNeighborGrad-legacy": (_resize_grad("ResizeNearestNeighborGrad", size=[3, 4]),
                                         lambda r: [_floats(r, 2, 7, 5, 2)], 0),
    "ResizeNearestNeighborGrad-align-corners-ties": (
        _resize_grad("ResizeNearestNeighborGrad", align=True, size=[3, 4]), lambda r: [_floats(r, 2, 7, 7, 3)], 0),
    "ResizeNearestNeighborGrad-half-pixel": (_resize_grad("ResizeNearestNeighborGrad", half=True, size=[5, 7]),
                                             lambda r: [_floats(r, 1, 2, 3, 5)], 0),
    "ResizeBilinear-legacy": (_resize("ResizeBilinear", [7, 5]), lambda r: [_floats(r, 2, 3, 4, 2)], 0),
    "ResizeBilinear-align-corners-3-channels": (_resize("ResizeBilinear", [7, 9], align=True),
                                                lambda r: [_floats(r, 2, 3, 4, 3)], 0),
    "ResizeBilinear-half-pixel-down": (_resize("ResizeBilinear", [2, 3], half=True), lambda r: [_floats(r, 1, 5, 7, 4)],
                                       0),
    "ResizeBilinear-half-pixel-nan": (_resize("ResizeBilinear", [6, 8], half=True), lambda r: [_data(r, 2, 3, 4, 3)],
                                      0),
    "ResizeBilinear-same-size-copies": (_resize("ResizeBilinear", [3, 4], half=True),
                                        lambda r: [_data(r, 2, 3, 4, 1)], 0),
    "ResizeBilinearGrad-legacy": (_resize_grad("ResizeBilinearGrad"),
                                  lambda r: [_floats(r, 2, 7, 5, 2), _floats(r, 2, 3, 4, 2)], 0),
    "ResizeBilinearGrad-align-corners": (_resize_grad("ResizeBilinearGrad", align=True),
                                         lambda r: [_floats(r, 2, 7, 9, 3), _floats(r, 2, 3, 4, 3)], 0),
    "ResizeBilinearGrad-half-pixel": (_resize_grad("ResizeBilinearGrad", half=True),
                                      lambda r: [_floats(r, 1, 6, 8, 2), _floats(r, 1, 5, 3, 2)], 0),
    "SpaceToBatchND": (lambda x: tf.space_to_batch_nd(x, [2, 3], [[1, 0], [2, 1]]), lambda r: [_data(r, 2, 5, 6, 3)], 0),
    "SpaceToBatchND-1d": (lambda x: tf.space_to_batch_nd(x, [2], [[1, 0]]), lambda r: [_data(r, 3, 7, 4)], 0),
    "BatchToSpaceND": (lambda x: tf.batch_to_space(x, [2, 3], [[1, 0], [0, 2]]), lambda r: [_data(r, 12, 3, 2, 2)],
                       0),
    "DepthToSpace": (lambda x: tf.nn.depth_to_space(x, 2), lambda r: [_data(r, 2, 3, 1, 8)], 0),
    "SpaceToDepth": (lambda x: tf.nn.space_to_depth(x, 2), lambda r: [_data(r, 2, 4, 6, 3)], 0),
}


def lower_and_run(fn, inputs):
    """(graph_ir's outputs, TF's outputs, the graph) of fn on inputs."""
    step = tf.function(fn)
    graph = graph_ir.from_tensorflow(step, *[tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)) for x in inputs])
    session = graph_ir.Session()
    session.add_graph(0, graph)
    got = session.run_graph(0, list(inputs))
    want = [t.numpy() for t in tf.nest.flatten(step(*inputs))]
    return got, want, graph


@pytest.mark.parametrize("name", list(CASES))
def test_lowered_op_runs_like_tensorflow(name):
    fn, make_inputs, tolerance = CASES[name]
    got, want, graph = lower_and_run(fn, make_inputs(np.random.default_rng(zlib.crc32(name.encode()))))
    ge_type = ops.LOWERINGS[name.split("-")[0]].ge_type
    # ConcatOffset folds (Const inputs); an empty TensorStridedSliceUpdate is its input (an Identity)
    assert ge_type in {n.type for n in graph.nodes.values()} or name in ("ConcatOffset", "TensorStridedSliceUpdate-empty")
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        if tolerance == 0:
            assert g.tobytes() == w.tobytes(), (g, w)
        else:
            assert scaled_difference(g, w) <= tolerance, scaled_difference(g, w)


def _halves(rng, *shape):
    return (_floats(rng, *shape) * 8).astype(np.float16)


# Other dtypes, bitwise too: float16 sums round at each step in both (Eigen's half, NumPy's float16), the resizes
# read every dtype as float32, and the long scans accumulate one element after the other.
DTYPE_CASES = {
    "Cumsum-float16": (lambda x: tf.cumsum(x, axis=0), lambda r: [_halves(r, 40, 3)]),
    "Cumsum-float64-reverse": (lambda x: tf.cumsum(x, axis=1, reverse=True),
                               lambda r: [_floats(r, 3, 40).astype(np.float64)]),
    "Cumsum-long-scan": (lambda x: tf.cumsum(x, axis=0), lambda r: [_floats(r, 3000, 3)]),
    "ResizeBilinear-uint8": (_resize("ResizeBilinear", [7, 5], half=True),
                             lambda r: [r.integers(0, 256, (2, 3, 4, 3)).astype(np.uint8)]),
    "ResizeBilinear-float16": (_resize("ResizeBilinear", [7, 5]), lambda r: [_halves(r, 2, 3, 4, 2)]),
    "ResizeBilinear-float64": (_resize("ResizeBilinear", [7, 5], align=True),
                               lambda r: [_floats(r, 2, 3, 4, 2).astype(np.float64)]),
    "ResizeNearestNeighbor-int32": (_resize("ResizeNearestNeighbor", [7, 5], half=True),
                                    lambda r: [_ints(r, 9, 2, 3, 4, 2, low=-9)]),
    "ResizeNearestNeighborGrad-float16-wide": (_resize_grad("ResizeNearestNeighborGrad", size=[3, 4]),
                                               lambda r: [_halves(r, 2, 7, 9, 17)]),
    "MirrorPadGrad-float16": (lambda g: tf.raw_ops.MirrorPadGrad(input=g, paddings=[[2, 1], [3, 3]], mode="REFLECT"),
                              lambda r: [_halves(r, 6, 10)]),
    "ScatterNd-float16-repeats": (lambda i, u: tf.scatter_nd(i, u, [3, 2]),
                                  lambda r: [np.array([[1], [1], [1], [0]], np.int32), _halves(r, 4, 2)]),
    "ReverseV2-bool": (lambda x: tf.reverse(x, [0]), lambda r: [r.integers(0, 2, 7).astype(bool)]),
    "Split-bool": (lambda x: tf.split(x, 2), lambda r: [r.integers(0, 2, 8).astype(bool)]),
    "GatherNd-int64-indices": (tf.gather_nd, lambda r: [_data(r, 3, 4), np.array([[2, 1], [0, 3]], np.int64)]),
}


@pytest.mark.parametrize("name", list(DTYPE_CASES))
def test_other_dtypes_run_like_tensorflow_bitwise(name):
    fn, make_inputs = DTYPE_CASES[name]
    got, want, _ = lower_and_run(fn, make_inputs(np.random.default_rng(zlib.crc32(name.encode()))))
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes(), (g, w)


@pytest.mark.parametrize("fn, specs, message", [
    (lambda x: tf.pad(x, [[1, 1]]), [((2,), tf.bool)], r"Pad 'Pad'.*input 'x' has dtype bool"),
    (lambda g, i: tf.raw_ops.ResizeBilinearGrad(grads=g, original_image=i),
     [((1, 4, 4, 2), tf.float32), ((1, 2, 2, 2), tf.float64)],
     r"ResizeBilinearV2Grad 'ResizeBilinearGrad'.*'original_image' has dtype float64"),
])
def test_dtypes_the_ge_ops_do_not_declare_are_refused(fn, specs, message):
    """GE's Pad takes BasicType (no bool); ResizeBilinearV2Grad's output is float32 only, so TF's float64 gradient
    (of a float64 image) has no GE counterpart."""
    with pytest.raises(graph_ir.LoweringError, match=message):
        graph_ir.from_tensorflow(tf.function(fn), *[tf.TensorSpec(s, d) for s, d in specs])


def test_every_lowering_of_the_two_families_is_tested():
    from graph_ir.lowering.ops import resize, slicing

    # ScatterNd's lowering (through int32 on bool) is graph_ir/lowering/ops/valued.py's; its cases are here.
    assert set(slicing.LOWERINGS) | set(resize.LOWERINGS) | {"ScatterNd"} == {name.split("-")[0] for name in CASES}
