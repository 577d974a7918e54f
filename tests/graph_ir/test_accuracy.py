"""Every float32 executor that sums is at least as close to the exact result as TensorFlow's own kernel: the
Session's max |error| against a float64 reference is <= TF's (tf.raw_ops on the same float32 inputs), or within
the float32 rounding of the reference itself (the best any float32 result can do). ImageNet-like sizes are slow;
each executor also has a fast, smaller case."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import graph_ir

EPS = 1e-3


def _data(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Normal values around 1 (so sums grow and their rounding shows), every 7th an exact zero."""
    x = (rng.standard_normal(shape) + 1).astype(np.float32)
    x.reshape(-1)[::7] = 0
    return x


def _moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = x.astype(np.float64)
    return x.mean(axis=(0, 1, 2)), x.var(axis=(0, 1, 2))


def _batch_norm(x, scale, offset):
    return tf.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=tf.zeros(0), variance=tf.zeros(0),
                                       epsilon=EPS, is_training=True)[:3]


def _batch_norm_reference(x, scale, offset):
    mean, var = _moments(x)
    count = x.size // x.shape[-1]
    y = (x - mean) / np.sqrt(var + EPS) * scale + offset
    return [y, mean, var * count / (count - 1)]


def _batch_norm_grad(dy, x, scale, mean, var):
    return tf.raw_ops.FusedBatchNormGradV3(y_backprop=dy, x=x, scale=scale, reserve_space_1=mean,
                                           reserve_space_2=var, reserve_space_3=tf.zeros(0), epsilon=EPS,
                                           is_training=True)[:3]


def _batch_norm_grad_reference(dy, x, scale, mean, var):
    inv = 1 / np.sqrt(var + EPS)
    centered = x - mean
    axes = (0, 1, 2)
    x_backprop = scale * inv * (dy - dy.mean(axis=axes) - centered * (dy * centered).mean(axis=axes) * inv * inv)
    return [x_backprop, (dy * centered).sum(axis=axes) * inv, dy.sum(axis=axes)]


def _softmax_reference(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


LABELS = np.arange(64, dtype=np.int32) * 7 % 1000


def _xent_reference(f):
    shifted = f - f.max(axis=1, keepdims=True)
    total = np.exp(shifted).sum(axis=1)
    backprop = np.exp(shifted) / total[:, None]
    backprop[np.arange(64), LABELS] -= 1
    return [np.log(total) - shifted[np.arange(64), LABELS], backprop]


def _statistics(rng, shape):
    """x, scale, mean and (biased) variance in float32, as BatchNormGrad receives them from the forward pass."""
    x = _data(rng, *shape)
    mean, var = _moments(x)
    c = shape[-1]
    return [_data(rng, *shape), x, _data(rng, c) + 1, mean.astype(np.float32), var.astype(np.float32)]


def _conv(x, f):
    return tf.nn.conv2d(x, f, 1, "SAME")


def _conv_input(x_shape):
    return lambda f, dy: tf.raw_ops.Conv2DBackpropInput(input_sizes=x_shape, filter=f, out_backprop=dy,
                                                        strides=[1] * 4, padding="SAME")


def _conv_filter(f_shape):
    return lambda x, dy: tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=f_shape, out_backprop=dy,
                                                         strides=[1] * 4, padding="SAME")


def _conv_cases(x_shape, outputs):
    """A 3x3 SAME convolution's three ops on x_shape [N, H, W, C] with `outputs` channels: (TF function, float64
    reference (TF's own kernel on float64), inputs, slow)."""
    f_shape, dy_shape = [3, 3, x_shape[3], outputs], [*x_shape[:3], outputs]
    name = f"3x3-({','.join(map(str, x_shape))})->{outputs}"
    backprop_input, backprop_filter = _conv_input(x_shape), _conv_filter(f_shape)
    return {
        f"Conv2D-{name}": (_conv, lambda x, f: [_conv(x, f).numpy()],
                           lambda r: [_data(r, *x_shape), _data(r, *f_shape)], False),
        f"Conv2DBackpropInput-{name}": (backprop_input, lambda f, dy: [backprop_input(f, dy).numpy()],
                                        lambda r: [_data(r, *f_shape), _data(r, *dy_shape)], False),
        f"Conv2DBackpropFilter-{name}": (backprop_filter, lambda x, dy: [backprop_filter(x, dy).numpy()],
                                         lambda r: [_data(r, *x_shape), _data(r, *dy_shape)], False),
    }


# name -> (TF function, reference in float64, inputs from a Generator, slow)
CASES = {
    "ReduceSum-NHW-(8,56,56,8)": (lambda x: tf.reduce_sum(x, axis=[0, 1, 2]), lambda x: [x.sum(axis=(0, 1, 2))],
                                  lambda r: [_data(r, 8, 56, 56, 8)], False),
    "ReduceSum-NHW-(32,112,112,8)": (lambda x: tf.reduce_sum(x, axis=[0, 1, 2]), lambda x: [x.sum(axis=(0, 1, 2))],
                                     lambda r: [_data(r, 32, 112, 112, 8)], True),
    "ReduceSum-last-(64,4096)": (lambda x: tf.reduce_sum(x, axis=-1), lambda x: [x.sum(axis=-1)],
                                 lambda r: [_data(r, 64, 4096)], False),
    "ReduceMean-NHW-(8,56,56,8)": (lambda x: tf.reduce_mean(x, axis=[0, 1, 2]), lambda x: [x.mean(axis=(0, 1, 2))],
                                   lambda r: [_data(r, 8, 56, 56, 8)], False),
    "ReduceMean-NHW-(32,112,112,8)": (lambda x: tf.reduce_mean(x, axis=[0, 1, 2]),
                                      lambda x: [x.mean(axis=(0, 1, 2))], lambda r: [_data(r, 32, 112, 112, 8)], True),
    "BiasAddGrad-(8,56,56,8)": (lambda x: tf.raw_ops.BiasAddGrad(out_backprop=x), lambda x: [x.sum(axis=(0, 1, 2))],
                                lambda r: [_data(r, 8, 56, 56, 8)], False),
    "BiasAddGrad-(32,112,112,8)": (lambda x: tf.raw_ops.BiasAddGrad(out_backprop=x),
                                   lambda x: [x.sum(axis=(0, 1, 2))], lambda r: [_data(r, 32, 112, 112, 8)], True),
    "BatchNorm-(8,56,56,8)": (_batch_norm, _batch_norm_reference,
                              lambda r: [_data(r, 8, 56, 56, 8), _data(r, 8), _data(r, 8)], False),
    "BatchNorm-(32,112,112,8)": (_batch_norm, _batch_norm_reference,
                                 lambda r: [_data(r, 32, 112, 112, 8), _data(r, 8), _data(r, 8)], True),
    "BatchNormGrad-(8,56,56,8)": (_batch_norm_grad, _batch_norm_grad_reference,
                                  lambda r: _statistics(r, (8, 56, 56, 8)), False),
    "BatchNormGrad-(32,112,112,8)": (_batch_norm_grad, _batch_norm_grad_reference,
                                     lambda r: _statistics(r, (32, 112, 112, 8)), True),
    "AvgPool-3x3-(8,56,56,8)": (
        lambda x: tf.raw_ops.AvgPool(value=x, ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="SAME"),
        lambda x: [tf.raw_ops.AvgPool(value=x, ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="SAME").numpy()],
        lambda r: [_data(r, 8, 56, 56, 8)], False),
    "AvgPool-global-(8,7,7,512)": (
        lambda x: tf.raw_ops.AvgPool(value=x, ksize=[1, 7, 7, 1], strides=[1, 1, 1, 1], padding="VALID"),
        lambda x: [x.mean(axis=(1, 2), keepdims=True)], lambda r: [_data(r, 8, 7, 7, 512)], False),
    # The convolutions: the direct ways (graph_ir/cc/direct_conv.h, direct_conv_filter.h) where AVX-512 runs them,
    # im2col and oneMKL's products for the rest (graph_ir/executors/direct_conv.py says which takes which)
    **_conv_cases([8, 32, 32, 64], 64),
    **_conv_cases([8, 16, 16, 128], 128),
    **_conv_cases([8, 8, 8, 256], 256),
    **_conv_cases([8, 4, 4, 512], 512),
    "SoftmaxV2-(64,1000)": (tf.nn.softmax, lambda x: [_softmax_reference(x)], lambda r: [_data(r, 64, 1000)], False),
    "SparseSoftmaxCrossEntropyWithLogits-(64,1000)": (
        lambda f: tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=f, labels=LABELS), _xent_reference,
        lambda r: [_data(r, 64, 1000)], False),
}


def _errors(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(got, np.float64) - want)))


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if CASES[n][3] else n for n in CASES])
def test_session_sums_are_at_least_as_accurate_as_tensorflow(name):
    fn, reference, make_inputs, _ = CASES[name]
    inputs = make_inputs(np.random.default_rng(len(name)))
    step = tf.function(fn)
    graph = graph_ir.from_tensorflow(step, *[tf.TensorSpec(x.shape, tf.float32) for x in inputs])
    session = graph_ir.Session()
    session.add_graph(0, graph)
    got = session.run_graph(0, inputs)
    theirs = [t.numpy() for t in tf.nest.flatten(step(*inputs))]
    exact = [np.asarray(w, np.float64) for w in reference(*[x.astype(np.float64) for x in inputs])]
    for k, (g, t, e) in enumerate(zip(got, theirs, exact, strict=True)):
        assert g.dtype == t.dtype == np.float32 and g.shape == t.shape, (name, k)
        ours, tfs = _errors(g, e), _errors(t, e)
        rounding = _errors(e.astype(np.float32), e)  # the float32 rounding of the exact result
        assert ours <= max(tfs, rounding), f"{name} output {k}: Session {ours:.3g}, TF {tfs:.3g} from float64"


@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_erf_and_erfc_are_at_least_as_accurate_as_tensorflow(name):
    """The vectorized float32 Erf and Erfc (GELU's), against math.erf / math.erfc in float64 on a grid over
    [-12, 12] with zeros, tiny values, NaN and +-inf: never further than TF's kernel, or within one float32 ulp of
    the reference; NaN stays NaN and the infinities give TF's limits."""
    fn = getattr(tf.math, name)
    x = np.concatenate([np.linspace(-12, 12, 48001), [0, -0.0, 1e-30, -1e-8, 2.9999, 3, 3.0001, 26, 27]])
    x = np.concatenate([x, [np.nan, np.inf, -np.inf]]).astype(np.float32)
    step = tf.function(fn)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.from_tensorflow(step, tf.TensorSpec(x.shape, tf.float32)))
    got, theirs = session.run_graph(0, [x])[0], step(x).numpy()
    np.testing.assert_array_equal(got[-3:], theirs[-3:])
    exact = np.vectorize(getattr(math, name))(x[:-3].astype(np.float64))
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    ours, tfs = np.abs(got[:-3] - exact), np.abs(theirs[:-3] - exact)
    assert np.all((ours <= tfs) | (ours <= ulp)), x[:-3][(ours > tfs) & (ours > ulp)][:5]


def _residual_cnn() -> keras.Model:
    """16x16x3, conv, BatchNormalization, relu, a residual block, average pooling, dense. No bias before a
    BatchNormalization: its gradient is 0 in exact arithmetic, rounding noise in float32."""
    x = inputs = keras.Input((16, 16, 3))
    x = keras.layers.ReLU()(keras.layers.BatchNormalization()(keras.layers.Conv2D(8, 3, padding="same",
                                                                                  use_bias=False)(x)))
    y = keras.layers.BatchNormalization()(keras.layers.Conv2D(8, 3, padding="same", use_bias=False)(x))
    x = keras.layers.ReLU()(keras.layers.Add()([x, y]))
    return keras.Model(inputs, keras.layers.Dense(5)(keras.layers.GlobalAveragePooling2D()(x)))


def _gradients(model: keras.Model):
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        return tape.gradient(loss, model.trainable_variables)

    return step


def test_a_residual_cnn_step_gradients_are_closer_to_float64_than_tensorflows():
    """One training step's gradients of a residual CNN with BatchNormalization: the largest error against the same
    model in float64 (keras dtype policy float64, same weights) over all gradient tensors, relative to the largest
    gradient, is the Session's no larger than TF's float32 run."""
    keras.utils.set_random_seed(3)
    model = _residual_cnn()
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((8, 16, 16, 3)).astype(np.float32), rng.integers(0, 5, 8).astype(np.int32)
    step = _gradients(model)
    theirs = [g.numpy() for g in step(x, y)]
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.from_tensorflow(step, tf.TensorSpec(x.shape, tf.float32),
                                                  tf.TensorSpec(y.shape, tf.int32)))
    got = session.run_graph(0, [x, y])
    policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float64")
    try:
        model64 = _residual_cnn()
        model64.set_weights([w.astype(np.float64) for w in model.get_weights()])
        exact = [g.numpy() for g in _gradients(model64)(x.astype(np.float64), y)]
    finally:
        keras.config.set_dtype_policy(policy)
    assert all(e.dtype == np.float64 for e in exact)
    largest = max(float(np.max(np.abs(e))) for e in exact)
    ours = max(_errors(g, e) for g, e in zip(got, exact, strict=True)) / largest
    tfs = max(_errors(t, e) for t, e in zip(theirs, exact, strict=True)) / largest
    assert ours <= tfs, (ours, tfs)
