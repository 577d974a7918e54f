"""Asserts and graph_ir.missing_ops: an Assert whose condition is known when lowering (tf.nn.compute_average_loss's
check of its batch size, tf.debugging.assert_* and tf.Assert on static shapes, guarded by an If whose predicate
folds) is checked then and the step lowers and trains as TF; one on the step's data is refused naming the node and
how to remove it; and missing_ops is non-empty exactly when from_tensorflow raises, over steps refused for several
reasons (an Assert on data, a string tensor, an unknown-shape argument, a slice it cannot size, an op without a
mapping) and steps that lower. Steps K = 3 with FusedEmaAdam within FLOAT32_TOLERANCE (measured: global_clipnorm
5.3e-7 / 6.7e-8, guarded asserts 1.4e-7 / 1.1e-7, state / loss scaled)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from tests.graph_ir.test_lowering_steps import SPARSE_XENT
from tests.graph_ir.test_structure_steps import S, _run, _step_compare, _types, _variable
from tests.helpers import train_steps
from tf_plugin.optimizers import FusedEmaAdam

# -- 5 and 6. Asserts, and missing_ops answering whether the step lowers -------------------------------------------

def _assert_step(x):
    tf.debugging.assert_positive(x)
    return x * 2.0


def _average_loss_step(x):
    return tf.nn.compute_average_loss(x)


def _unknown_shape_step(x):
    return x * 2.0  # lowers with an unknown dim (GE's -1), refused with an unknown rank


def _string_step(x):
    tf.print("x is", x)
    return x + 1.0


def _uneven_slice_step(x):
    total = tf.zeros([3])
    for i in tf.range(2):
        total += tf.reduce_sum(x[i:2 * i + 1], 0)
    return total


def _fine_step(x):
    return tf.reduce_sum(x[..., :2] * tf.einsum("...,a->...a", x[:, 0], tf.ones([2])))


_CLIPPED = tf.Variable(np.ones(3, np.float32), name="clipped")


def _global_norm_clip_step(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(_CLIPPED * x)
    grads, _ = tf.clip_by_global_norm(tape.gradient(loss, [_CLIPPED]), 1.0)  # L2Loss, while it has no lowering
    _CLIPPED.assign_sub(grads[0])
    return loss


# (step, spec, whether from_tensorflow refuses it: None when that depends on ops others are adding)
_STEPS = [(_assert_step, S((3,), tf.float32), True), (_average_loss_step, S((3,), tf.float32), False),
          (_unknown_shape_step, S((None,), tf.float32), False), (_unknown_shape_step, S(None, tf.float32), True),
          (_string_step, S((3,), tf.float32), True),
          (_uneven_slice_step, S((4, 3), tf.float32), True), (_fine_step, S((4, 3), tf.float32), False),
          (_global_norm_clip_step, S((3,), tf.float32), None)]


@pytest.mark.parametrize("fn, spec, refused", _STEPS,
                         ids=[f"{s[0].__name__}-{s[1].shape.rank}" for s in _STEPS])
def test_missing_ops_is_non_empty_exactly_when_from_tensorflow_raises(fn, spec, refused):
    step = tf.function(fn)
    missing = graph_ir.missing_ops(step, spec)
    try:
        graph_ir.from_tensorflow(step, spec)
        raised = False
    except graph_ir.LoweringError:
        raised = True
    assert refused is None or raised == refused
    assert bool(missing) == raised, str(missing)
    if "L2Loss" in missing:  # a known rewrite is said
        assert "global_clipnorm=" in str(missing)


def test_keras_global_clipnorm_step_lowers(tmp_path):
    """The rewrite missing_ops suggests for tf.clip_by_global_norm's L2Loss: the optimizer's own global_clipnorm=."""
    keras.utils.set_random_seed(90)
    model = train_steps.mlp()
    optimizer = FusedEmaAdam(0.01, global_clipnorm=0.5)
    step = train_steps.train_step(model, SPARSE_XENT, optimizer)
    specs = [S((4, 12), tf.float32), S((4,), tf.int32)]
    batch = train_steps.batches(91, *specs, y_high=5)
    step(*batch(-1))
    assert graph_ir.missing_ops(step, *specs) == {}
    _step_compare(step, specs, batch, [*model.variables, *optimizer.variables], tmp_path)


def test_assert_on_the_steps_data_is_refused_naming_the_node_and_how_to_remove_it():
    with pytest.raises(graph_ir.LoweringError, match=r"Assert \(node 'assert_positive.*remove the assertion"):
        graph_ir.from_tensorflow(tf.function(_assert_step), S((3,), tf.float32))
    missing = graph_ir.missing_ops(tf.function(_assert_step), S((3,), tf.float32))
    assert list(missing) == ["Assert"] and missing["Assert"][0].endswith("Assert")
    assert "remove the assertion" in str(missing)


def test_assert_known_when_lowering_is_checked_then():
    """compute_average_loss asserts its batch size (from the static shape) is >= 0: checked when lowering, the step
    lowers and gives TF's loss; an assertion that fails on every run is a LoweringError."""
    x = np.array([1.0, 0.0, -2.5, 4.0], np.float32)
    graph, got, want = _run(tf.function(_average_loss_step), x)
    np.testing.assert_array_equal(got[0], want[0])
    assert "Assert" not in _types(graph)

    def never(x):
        tf.debugging.assert_equal(tf.shape(x)[0], 5)
        return x + 1.0

    with pytest.raises(graph_ir.LoweringError, match=r"Assert \(node .*false whatever the step's data"):
        graph_ir.from_tensorflow(tf.function(never), S((4,), tf.float32))


def test_guarded_asserts_on_static_shapes_lower_and_train(tmp_path):
    """tf.Assert with tensors in its message (an If, AssertGuard, whose predicate folds to a Const on static shapes)
    and tf.debugging.assert_* on shapes, in a training step: the If runs the branch TF runs, the step trains as TF."""
    w = _variable(100, (4, 3), "w_guarded")
    optimizer = FusedEmaAdam(0.01)

    @tf.function
    def step(x, y):
        tf.debugging.assert_equal(tf.shape(x)[0], tf.shape(y)[0], message="batch sizes differ")
        tf.debugging.assert_rank(x, 2)
        tf.Assert(tf.shape(x)[1] < 9, [x, tf.shape(x)])
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(tf.square(tf.reduce_sum(tf.tanh(x @ w), 1) - y))
        optimizer.apply_gradients([(tape.gradient(loss, w), w)])
        return loss

    specs = [S((5, 4), tf.float32), S((5,), tf.float32)]
    step(*train_steps.batches(101, *specs)(-1))
    assert graph_ir.missing_ops(step, *specs) == {}
    _step_compare(step, specs, train_steps.batches(101, *specs), [w, *optimizer.variables], tmp_path)

    @tf.function
    def never(x):
        tf.Assert(tf.shape(x)[1] > 9, [x])
        return x * 2.0

    # (the branch sees the static shape it is passed, so the Assert's condition is found false inside it)
    with pytest.raises(graph_ir.LoweringError, match=r"Assert 'Assert/AssertGuard/Assert': its condition is false"):
        graph_ir.from_tensorflow(never, S((5, 4), tf.float32))
    assert list(graph_ir.missing_ops(never, S((5, 4), tf.float32))) == ["Assert"]
