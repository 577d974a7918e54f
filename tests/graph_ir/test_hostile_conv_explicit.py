"""The conv family against TF's EXPLICIT padding (issue 38): pads that only EXPLICIT gives (neither zero nor SAME's)
make TF's CPU filter gradient multiply x's zero padding, so an inf or NaN of out_backprop meeting it gives NaN
(tensorflow/core/kernels/conv_grad_filter_ops.cc); graph_ir's does the same (graph_ir/executors/filter_grad.py).
Each graph goes through a file into graph_ir.Session and is compared with tf.raw_ops."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

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


def _conv_file(tmp_path, pads: list[int], strides: list[int], *, written: dict | None = None) -> str:
    """A .pbtxt Conv2D "conv" of x [2, 3, 4, 2] by a 2x2 filter with `pads` and `strides`; `written` then replaces
    attributes in the file as a hostile editor would (the builder refuses what TF refuses)."""
    graph = graph_ir.Graph("huge")
    with graph:
        x, f = graph_ir.Data(0, "float32", (2, 3, 4, 2), name="x"), graph_ir.Data(1, "float32", (2, 2, 2, 3), name="f")
        graph.set_outputs([ops.Conv2D(x, f, strides=strides, pads=pads, name="conv")])
    model = graph.to_model_def()
    (conv,) = [op for op in model.graph[0].op if op.name == "conv"]
    for key, values in (written or {}).items():
        del conv.attr[key].list.i[:]
        conv.attr[key].list.i.extend(values)
    path = tmp_path / "conv.pbtxt"
    path.write_text(text_format.MessageToString(model))
    return str(path)


@pytest.mark.parametrize("power", [16, 20, 24])
def test_a_pbtxt_conv2d_with_huge_pads_computes_what_tensorflow_computes(tmp_path, power):
    """Pads of 2^k + 1 (the bottom one 2^k + 4) with strides 2^k: a 3x3 output whose windows each read a corner of x.
    At 2^28 TF's own kernels fail (oneDNN: "could not create a primitive"; Eigen's int32 indexing gives other
    values), and at 2^31-1 TF's Conv2D refuses the padding; graph_ir computes the sums up to that bound."""
    rng = np.random.default_rng(power)
    x, f = rng.standard_normal((2, 3, 4, 2)).astype(np.float32), rng.standard_normal((2, 2, 2, 3)).astype(np.float32)
    pads, strides = [2**power + 1, 2**power + 4, 2**power + 1, 2**power + 1], [1, 2**power, 2**power, 1]
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.load(_conv_file(tmp_path, pads, strides)))
    (got,) = session.run_graph(0, [x, f])
    want = tf.raw_ops.Conv2D(input=x, filter=f, strides=strides, padding="EXPLICIT",
                             explicit_paddings=[0, 0, *pads, 0, 0]).numpy()
    assert got.shape == want.shape == (2, 3, 3, 3)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert np.count_nonzero(want) > 0


@pytest.mark.parametrize("written, field", [
    ({"pads": [2**31 - 1, 0, 0, 0]}, "pads"),  # TF: "filter too large" (Eigen), a segfault (oneDNN)
    ({"pads": [0, 0, 2**40, 0], "strides": [1, 2**30, 2**30, 1]}, "pads"),  # TF: "... out of range for an int32"
    ({"strides": [1, 2**31, 1, 1]}, "strides"),  # TF: "Attr strides has value 2147483648 out of range for an int32"
])
def test_a_pbtxt_conv2d_with_pads_or_strides_tensorflow_refuses_is_refused(tmp_path, written, field):
    with pytest.raises(graph_ir.GraphError, match=rf"'conv'.*{field} must"):
        graph_ir.load(_conv_file(tmp_path, [0, 0, 0, 0], [1, 1, 1, 1], written=written))
