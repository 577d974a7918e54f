"""Gradients of slices at computed positions (issue 48): TF's StridedSliceGrad whose begin and end are computed in the
step (`action_probs[0, action]` in keras.io's actor-critic example, `w[i:i + 2]`, a slice of a computed tensor in
a tf.range loop) lowered onto GE StridedSliceGrad
with begin and end as computed inputs (graph_ir/lowering/ops/dynamic_slice.py), run in graph_ir.Session beside TF.

Tolerance: StridedSliceGrad only moves dy into zeros, so the gradients alone are compared bitwise; the actor-critic
steps (K = 3) within FLOAT32_TOLERANCE (1e-5) of each tensor's own scale, as the other step tests (the matmuls and
reductions are not bitwise Eigen's). Measured (K = 3), state / loss scaled: action argument with FusedEmaAdam
1.2e-7 / 1.6e-7, argmax action with keras Adam 1.6e-7 / 4.8e-7. In a step the forward `action_probs[0, action]`
(GE Slice) refuses an out-of-range action first, before anything is written."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import layers

import graph_ir
from tests.graph_ir.test_lowering_steps import FLOAT32_TOLERANCE
from tests.helpers import train_steps
from tf_plugin.optimizers import FusedEmaAdam

S = tf.TensorSpec


def _session(fn, *specs):
    graph = graph_ir.from_tensorflow(fn, *specs)
    session = graph_ir.Session()
    session.add_graph(0, graph)
    return graph, session


def _picked_gradient():
    w = tf.Variable(np.random.default_rng(80).standard_normal((3, 4)).astype(np.float32), name="w_picked")

    @tf.function
    def grad(action, x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w[0, action] * x)
        return tape.gradient(loss, w)

    return grad


def _rows_gradient():
    """TF's StridedSliceGrad of `w[i:i + 2, 1:3]` for w of shape [3, 4] alone (in a step, the forward slice runs
    first and refuses a negative or out-of-range i itself: tests/graph_ir/test_structure_steps.py)."""

    @tf.function
    def grad(i, dy):
        return tf.raw_ops.StridedSliceGrad(shape=[3, 4], begin=tf.stack([i, 1]), end=tf.stack([i + 2, 3]),
                                           strides=[1, 1], dy=dy)

    return grad


def test_gradient_at_a_computed_index_bitwise_tf():
    grad = _picked_gradient()
    specs = [S((), tf.int32), S((5,), tf.float32)]
    missing = graph_ir.missing_ops(grad, *specs)
    assert missing == {}, str(missing)
    graph, session = _session(grad, *specs)
    assert "StridedSliceGrad" in {n.type for n in graph.nodes.values()}
    x = (np.random.default_rng(82).integers(-64, 64, 5) / 8).astype(np.float32)  # exact sums: any order
    for action in (0, 1, 2, 3, -1, -4):  # a negative index counts from the end, as in TF
        got = session.run_graph(0, [np.int32(action), x])[0]
        np.testing.assert_array_equal(got, grad(tf.constant(action), x).numpy(), err_msg=str(action))


def test_gradient_of_computed_rows_bitwise_tf():
    grad = _rows_gradient()
    _, session = _session(grad, S((), tf.int32), S((2, 2), tf.float32))
    x = np.random.default_rng(83).standard_normal((2, 2)).astype(np.float32)
    for i in (0, 1, -3):
        got = session.run_graph(0, [np.int32(i), x])[0]
        np.testing.assert_array_equal(got, grad(tf.constant(i), x).numpy(), err_msg=str(i))


def test_gradient_of_a_computed_tensor_sliced_in_a_loop_bitwise_tf():
    """`h[i * 2:(i + 1) * 2]` of a computed h in a tf.range loop: the gradient's begin and end are popped off two
    TensorLists, so their difference is not known when lowering; dy's static shape is checked at run time."""
    w = tf.Variable(np.random.default_rng(88).standard_normal((6, 5)).astype(np.float32), name="w_loop")

    @tf.function
    def grad(x):
        with tf.GradientTape() as tape:
            h = x * w
            total = tf.constant(0.0)
            for i in tf.range(3):
                total += tf.reduce_sum(tf.square(h[i * 2:(i + 1) * 2]))
        return tape.gradient(total, w)

    spec = S((6, 5), tf.float32)
    missing = graph_ir.missing_ops(grad, spec)
    assert missing == {}, str(missing)
    _, session = _session(grad, spec)
    x = np.random.default_rng(89).standard_normal((6, 5)).astype(np.float32)
    np.testing.assert_array_equal(session.run_graph(0, [x])[0], grad(x).numpy())


@pytest.mark.parametrize(("make", "value", "message"), [
    (_picked_gradient, 4, r"StridedSliceGrad '.*StridedSliceGrad'.*index 4 is out of bounds"),
    (_picked_gradient, -5, r"StridedSliceGrad '.*StridedSliceGrad'.*index -5 is out of bounds"),
    (_rows_gradient, 2, r"StridedSliceGrad '.*StridedSliceGrad'.*slice of shape \[1, 2\].*dy has shape \[2, 2\]"),
])
def test_gradient_out_of_range_is_refused_naming_the_node(make, value, message):
    """TF refuses these too (an index out of bounds; a range clamped to another shape than dy's)."""
    grad = make()
    shape = (5,) if make is _picked_gradient else (2, 2)
    _, session = _session(grad, S((), tf.int32), S(shape, tf.float32))
    with pytest.raises(graph_ir.GraphError, match=message):
        session.run_graph(0, [np.int32(value), np.ones(shape, np.float32)])


# -- keras.io's actor-critic step ----------------------------------------------------------------------------------

def _actor_critic(seed: int) -> keras.Model:
    """keras.io's "Actor Critic Method" model, smaller: a common relu layer, a softmax actor and a linear critic."""
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((4,))
    common = layers.Dense(16, activation="relu")(inputs)
    return keras.Model(inputs, [layers.Dense(2, activation="softmax")(common), layers.Dense(1)(common)])


def _step(model, optimizer, argmax: bool):
    huber = keras.losses.Huber()

    @tf.function
    def step(state, action, ret):
        with tf.GradientTape() as tape:
            action_probs, critic_value = model(state)
            if argmax:
                action = tf.argmax(action_probs[0])  # the greedy action: an int64 computed in the step
            log_prob = tf.math.log(action_probs[0, action])
            value = critic_value[0, 0]
            actor_loss = -log_prob * (ret - value)
            critic_loss = huber(tf.expand_dims(value, 0), tf.expand_dims(ret, 0))
            loss = actor_loss + critic_loss
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step


_SPECS = [S((1, 4), tf.float32), S((), tf.int32), S((), tf.float32)]


def _batch(seed: int):
    rng = np.random.default_rng(seed)
    return lambda k: (rng.standard_normal((1, 4)).astype(np.float32), np.int32(rng.integers(0, 2)),
                      np.float32(rng.standard_normal()))


@pytest.mark.parametrize("argmax", [False, True], ids=["action_argument", "argmax_action"])
def test_actor_critic_step_as_tf(argmax, tmp_path):
    model = _actor_critic(84)
    optimizer = keras.optimizers.Adam(0.01) if argmax else FusedEmaAdam(0.01)
    step = _step(model, optimizer, argmax)
    step(*_batch(0)(-1))
    missing = graph_ir.missing_ops(step, *_SPECS)
    assert missing == {}, str(missing)
    graph, differences, loss = train_steps.lower_and_compare(step, _SPECS, _batch(85), [*model.variables,
                                                                                       *optimizer.variables],
                                                             str(tmp_path))
    assert len(differences) >= len(model.trainable_variables)
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert loss <= FLOAT32_TOLERANCE
    assert {"Slice", "StridedSliceGrad"} <= {n.type for n in graph.nodes.values()}


def test_actor_critic_out_of_range_action_is_refused_nothing_written():
    model = _actor_critic(86)
    optimizer = FusedEmaAdam(0.01)
    step = _step(model, optimizer, argmax=False)
    step(*_batch(0)(-1))
    graph, session = _session(step, *_SPECS)
    names = [graph.variable_name(v) for v in model.trainable_variables]
    before = session.get_variables(names)
    state, _, ret = _batch(87)(0)
    with pytest.raises(graph_ir.GraphError, match=r"Slice '.*strided_slice.*offsets\[1\] = 2"):
        session.run_graph(0, [state, np.int32(2), ret])
    for name, was, now in zip(names, before, session.get_variables(names)):
        np.testing.assert_array_equal(now, was, err_msg=name)
