"""The conv family against TF's EXPLICIT padding (issue 38): pads that only EXPLICIT gives (neither zero nor SAME's)
make TF's CPU filter gradient multiply x's zero padding, so an inf or NaN of out_backprop meeting it gives NaN
(tensorflow/core/kernels/conv_grad_filter_ops.cc); graph_ir's does the same (graph_ir/executors/filter_grad.py).
Each graph goes through a file into graph_ir.Session and is compared with tf.raw_ops."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import ops
from tests.graph_ir.test_hostile_conv_values import _same_specials, _with_specials
from tests.helpers.hostile_graphs import ints, run_hostile

EXPLICIT = {  # name: (strides, dilations, pads [top, bottom, left, right], x shape, filter shape)
    "s1": ([1, 1, 1, 1], [1, 1, 1, 1], [2, 0, 0, 3], (2, 6, 4, 1), (4, 1, 1, 3)),
    "s1-square": ([1, 1, 1, 1], [1, 1, 1, 1], [2, 1, 0, 1], (1, 5, 6, 2), (3, 3, 2, 3)),
    "s2-odd": ([1, 2, 3, 1], [1, 1, 1, 1], [1, 1, 1, 2], (1, 2, 3, 3), (2, 4, 3, 3)),
    "s3": ([1, 3, 2, 1], [1, 1, 1, 1], [3, 1, 3, 3], (1, 2, 5, 1), (4, 1, 1, 3)),
    "s2-wide": ([1, 2, 2, 1], [1, 1, 1, 1], [0, 3, 2, 0], (2, 5, 6, 2), (2, 3, 2, 2)),
}  # (TF's CPU filter gradient refuses EXPLICIT padding with dilations > 1: "do not yet support dilation rates")


@pytest.mark.parametrize("name", list(EXPLICIT))
@pytest.mark.parametrize("special", ["x", "dy", "both"])
@pytest.mark.parametrize("seed", range(3))
def test_explicit_pads_filter_gradient_has_tensorflows_nan(name, special, seed):
    """NaN and +-inf in x and out_backprop: NaN exactly where TF's EXPLICIT filter gradient has NaN, the same
    infinities, the finite values within rounding."""
    strides, dilations, pads, x_shape, f_shape = EXPLICIT[name]
    rng = np.random.default_rng(zlib.crc32(f"{name}{special}{seed}".encode()))
    x = _with_specials(rng, x_shape, special in ("x", "both"))
    tf_geometry = {"strides": strides, "dilations": dilations, "padding": "EXPLICIT",
                   "explicit_paddings": [0, 0, *pads, 0, 0]}
    y_shape = tf.raw_ops.Conv2D(input=x, filter=np.ones(f_shape, np.float32), **tf_geometry).shape
    dy = _with_specials(rng, y_shape, special in ("dy", "both"))
    geometry = {"strides": strides, "pads": pads, "dilations": dilations}
    (got,), _, _ = run_hostile(lambda x, dy: ops.Conv2DBackpropFilter(x, ints(*f_shape), dy, **geometry), [x, dy])
    want = tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=f_shape, out_backprop=dy, **tf_geometry).numpy()
    if special != "x":
        assert np.isnan(want).any()
    _same_specials(got, want)


def test_one_inf_in_the_padding_makes_its_channel_nan_at_the_taps_that_meet_padding():
    """dy[0, 0, 0, 0] = inf: taps 0 and 1 along H read padding for output row 0 (pads top 2), so their channel 0 is
    NaN (0 * inf); taps 2 and 3 read x there, and x's finite values give inf, as in TF."""
    x = np.random.default_rng(3).standard_normal((2, 6, 4, 1)).astype(np.float32)
    dy = np.ones((2, 5, 7, 3), np.float32)
    dy[0, 0, 0, 0] = np.inf
    geometry = {"strides": [1, 1, 1, 1], "pads": [2, 0, 0, 3]}
    (got,), _, _ = run_hostile(lambda x, dy: ops.Conv2DBackpropFilter(x, ints(4, 1, 1, 3), dy, **geometry), [x, dy])
    want = tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=[4, 1, 1, 3], out_backprop=dy, strides=[1, 1, 1, 1],
                                           padding="EXPLICIT", explicit_paddings=[0, 0, 2, 0, 0, 3, 0, 0]).numpy()
    np.testing.assert_array_equal(np.isnan(want[:, 0, 0, 0]), [True, True, False, False])
    _same_specials(got, want)


def test_a_dilated_filter_gradient_with_explicit_padding_is_refused_as_tensorflow_refuses_it():
    """TF's CPU Conv2DBackpropFilter refuses EXPLICIT padding with dilations > 1; the lowering refuses it by name."""
    x = np.ones((1, 6, 6, 2), np.float32)
    dy = np.ones((1, 4, 4, 3), np.float32)
    attrs = {"strides": [1, 1, 1, 1], "padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, 1, 1, 1, 0, 0],
             "dilations": [1, 2, 2, 1]}
    with pytest.raises((tf.errors.InvalidArgumentError, tf.errors.UnimplementedError)):
        tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=[2, 2, 2, 3], out_backprop=dy, **attrs)
    step = tf.function(lambda x, dy: tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=[2, 2, 2, 3],
                                                                      out_backprop=dy, **attrs))
    with pytest.raises(graph_ir.LoweringError, match=r"Conv2DBackpropFilter .*EXPLICIT padding with dilations"):
        graph_ir.from_tensorflow(step, tf.TensorSpec(x.shape), tf.TensorSpec(dy.shape))
