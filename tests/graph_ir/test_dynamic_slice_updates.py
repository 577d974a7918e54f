"""Slice updates and slice gradients at computed positions (issue 48): `var[i].assign(x)` / `var[i:i + 2].assign(x)`
(TF's ResourceStridedSliceAssign onto GE StridedSliceAssign), TensorStridedSliceUpdate and keras.ops.slice_update
(XlaDynamicUpdateSlice) onto GE StridedSliceGrad + SelectV2, and tf.slice's gradient at a computed begin (TF's
SliceGrad: a Pad whose paddings are computed, y's shape static), each in a training step lowered, saved as .air,
reloaded and run K = 3 steps in graph_ir.Session beside TF (tests/helpers/train_steps.py), and refused out of range
naming the node before anything is written.

Tolerance: the slice updates and the Pad only move values, so the ops alone are compared bitwise (NaN, -0.0); the
steps within FLOAT32_TOLERANCE (1e-5) of each tensor's own scale, as the other step tests (their matmuls are not
bitwise Eigen's); the rows written at argmax positions come from exact ties (zero input rows) or clear winners.
Measured (K = 3), state / loss scaled: Variable rows 1.9e-7 / 0, tf.slice's gradient 1.0e-7 / 1.4e-7, tensor slice
updates 1.6e-7 / 0."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import layers
from tensorflow.compiler.tf2xla.python import xla

import graph_ir
from tests.graph_ir.test_lowering_steps import FLOAT32_TOLERANCE
from tests.helpers import train_steps

S = tf.TensorSpec


def _session(fn, *specs, folder=None):
    """The lowered graph (it names the captured variables) and a Session running it, or its .air copy reloaded."""
    graph = run = graph_ir.from_tensorflow(fn, *specs)
    if folder is not None:
        graph.save(f"{folder}/{graph.name}.air")
        run = graph_ir.load(f"{folder}/{graph.name}.air")
    session = graph_ir.Session()
    session.add_graph(0, run)
    return graph, session


def _model(seed: int, width: int) -> keras.Model:
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((7,))
    return keras.Model(inputs, layers.Dense(width)(layers.Dense(6, activation="relu")(inputs)))


def _batch(seed: int, rows: int = 5, high: int = 6):
    """x with a zero row (ties in argmax) and negatives, y, and a computed-position argument in [0, high)."""
    rng = np.random.default_rng(seed)

    def batch(k):
        x = rng.standard_normal((rows, 7)).astype(np.float32)
        x[rng.integers(0, rows)] = 0
        return x, rng.standard_normal((rows, 3)).astype(np.float32), np.int32(rng.integers(0, high))

    return batch


_SPECS = [S((5, 7), tf.float32), S((5, 3), tf.float32), S((), tf.int32)]


def _as_tf(make, seed: int, tmp_path, types, rows: int | None = None, high: int = 6) -> None:
    """The step `make(model, optimizer[, a Variable of `rows` rows])` lowered with nothing missing and run K steps
    beside TF (train_steps.lower_and_compare: through .air), its graph holding GE ops `types`."""
    model, optimizer = _model(seed, 3), keras.optimizers.Adam(0.01)
    extra = [] if rows is None else [tf.Variable(np.zeros((rows, 3), np.float32), name=f"rows_{seed}")]
    step = make(model, optimizer, *extra)
    step(*_batch(0, high=high)(-1))
    assert graph_ir.missing_ops(step, *_SPECS) == {}
    graph, differences, loss = train_steps.lower_and_compare(step, _SPECS, _batch(seed + 1, high=high),
                                                             [*model.variables, *optimizer.variables, *extra],
                                                             str(tmp_path))
    assert set(types) <= {n.type for n in graph.nodes.values()}, types
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert loss <= FLOAT32_TOLERANCE


def _memory_step(model, optimizer, memory, only_rows: bool = False):
    """A step that trains the model, then writes its prediction into a memory Variable at computed rows: the row of
    the largest prediction (tf.argmax: a shrunk axis) and two rows at the argument j, the rows of a tf.range loop
    (`only_rows`: the two rows at j alone)."""

    @tf.function
    def step(x, y, j):
        with tf.GradientTape() as tape:
            pred = model(x)
            loss = tf.reduce_mean(tf.square(pred - y))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        memory[j:j + 2].assign(pred[1:3])
        if only_rows:
            return loss
        memory[tf.argmax(tf.reduce_sum(pred, 1), output_type=tf.int32)].assign(pred[0])
        for k in tf.range(2):
            memory[k * 3 + 1].assign(pred[k + 3] * 2.0)
        return loss

    return step


def test_variable_rows_at_computed_positions_as_tf(tmp_path):
    _as_tf(_memory_step, 90, tmp_path, ["StridedSliceAssign"], rows=7)


@pytest.mark.parametrize("j", [0, 4, 5, 6, 7, -1, -2, -3, -7, -8])
def test_variable_rows_bitwise_tf_empty_slices_write_nothing(j, tmp_path):
    """`memory[j:j + 2].assign(x)` over the range TF takes (negative j from the end, empty ranges a no-op) and
    `memory[j].assign(r)`: bitwise, NaN and -0.0 included; what TF refuses is refused, memory unchanged."""
    memory = tf.Variable(np.arange(21, dtype=np.float32).reshape(7, 3), name="rows")

    @tf.function
    def write(x, r, j):
        memory[j:j + 2].assign(x)
        memory[j].assign(r)
        return tf.identity(memory)

    specs = [S((2, 3), tf.float32), S((3,), tf.float32), S((), tf.int32)]
    graph, session = _session(write, *specs, folder=str(tmp_path))
    x, r = np.array([[np.nan, -0.0, 1.5], [np.inf, 0.0, -2.0]], np.float32), np.array([-0.0, 7, np.nan], np.float32)
    name = graph.variable_name(memory)
    before = session.get_variables([name])[0]
    try:
        want = write(x, r, np.int32(j)).numpy()
    except tf.errors.InvalidArgumentError:
        with pytest.raises(graph_ir.GraphError, match=r"StridedSliceAssign '.*_assign.*'"):
            session.run_graph(0, [x, r, np.int32(j)])
        np.testing.assert_array_equal(session.get_variables([name])[0], before)
        return
    got = session.run_graph(0, [x, r, np.int32(j)])[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_variable_rows_out_of_range_refused_by_name_memory_unchanged():
    model, optimizer = _model(92, 3), keras.optimizers.SGD(0.01)
    memory = tf.Variable(np.zeros((7, 3), np.float32), name="memory_refused")
    step = _memory_step(model, optimizer, memory, only_rows=True)
    step(*_batch(0)(-1))
    graph, session = _session(step, *_SPECS)
    name = graph.variable_name(memory)
    before = session.get_variables([name])[0]
    x, y, _ = _batch(93)(0)
    with pytest.raises(graph_ir.GraphError, match=r"StridedSliceAssign '.*_assign': .*slice of shape \[1, 3\].*"
                                                  r"input_value has shape \[2, 3\]"):
        session.run_graph(0, [x, y, np.int32(6)])  # rows 6:8 of 7: TF refuses it too
    np.testing.assert_array_equal(session.get_variables([name])[0], before)


def _slice_step(model, optimizer):
    """tf.slice of the prediction at a computed begin (the argument i, and the argmax row) under GradientTape:
    TF's SliceGrad pads the gradient with paddings computed from begin."""

    @tf.function
    def step(x, y, i):
        with tf.GradientTape() as tape:
            pred = model(x)
            row = tf.argmax(tf.reduce_max(y, 1), output_type=tf.int32)
            part = tf.slice(pred, tf.stack([i, 0]), [2, 3]) - tf.slice(y, [0, 0], [2, 3])
            picked = tf.slice(pred, tf.stack([row, 1]), [1, 2])
            loss = tf.reduce_mean(tf.square(part)) + tf.reduce_sum(picked)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    return step


def test_slice_gradient_at_a_computed_begin_as_tf(tmp_path):
    _as_tf(_slice_step, 94, tmp_path, ["Pad"], high=4)


def test_slice_gradient_with_an_unknown_batch_as_tf(tmp_path):
    """Lowered with None rows (graph_ir/dynamic: the paddings' sums known at each probe size), through .air, run at
    6, 9 and 5 rows beside TF."""
    model, optimizer = _model(98, 3), keras.optimizers.SGD(0.01)
    step = _slice_step(model, optimizer)
    step(*_batch(0, high=4)(-1))
    graph, session = _session(step, S((None, 7), tf.float32), S((None, 3), tf.float32), S((), tf.int32),
                              folder=str(tmp_path))
    for rows in (6, 9, 5):
        x, y, i = _batch(rows, rows=rows, high=4)(0)
        got, want = session.run_graph(0, [x, y, i])[0], step(x, y, i).numpy()
        assert train_steps.scaled_difference(got, want) <= FLOAT32_TOLERANCE, rows
    names = [graph.variable_name(v) for v in model.trainable_variables]
    for got, v in zip(session.get_variables(names), model.trainable_variables):
        assert train_steps.scaled_difference(got, v.numpy()) <= FLOAT32_TOLERANCE, v.name


@pytest.mark.parametrize("i", [0, 1, 3, 4, -1])
def test_computed_paddings_bitwise_tf_negative_refused(i):
    """Pad at paddings computed from i (before i, after 4 - i: y's shape static); TF refuses a negative padding."""

    @tf.function
    def pad(x, i):
        return tf.raw_ops.Pad(input=x, paddings=tf.stack([tf.stack([i, 4 - i]), [1, 0]]))

    graph, session = _session(pad, S((3, 2), tf.float32), S((), tf.int32))
    assert graph.outputs[0].shape == (7, 3)
    x = np.array([[np.nan, -0.0], [1, -2], [0, np.inf]], np.float32)
    if i < 0:
        with pytest.raises(graph_ir.GraphError, match=r"Pad '.*Pad'.*paddings \[\[-1, 5\], \[1, 0\]\] must be non-"):
            session.run_graph(0, [x, np.int32(i)])
        return
    got, want = session.run_graph(0, [x, np.int32(i)])[0], pad(x, np.int32(i)).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_paddings_whose_sum_is_computed_are_refused_by_name():
    pad = tf.function(lambda x, i: tf.raw_ops.Pad(input=x, paddings=tf.stack([tf.stack([i, i]), [0, 0]])))
    with pytest.raises(graph_ir.LoweringError, match=r"Pad '.*Pad'.*size of dim 0 of y \(before \+ after\) is not a "
                                                     r"constant"):
        graph_ir.from_tensorflow(pad, S((3, 2), tf.float32), S((), tf.int32))


def _update_step(model, optimizer, buffer):
    """TensorStridedSliceUpdate of the prediction at the row i under GradientTape (its gradient: a
    TensorStridedSliceUpdate of zeros and a StridedSlice at i), then keras.ops.slice_update
    (XlaDynamicUpdateSlice) of a rolling buffer at the argmax row, clamped by XLA's rule."""

    @tf.function
    def step(x, y, i):
        with tf.GradientTape() as tape:
            pred = model(x)
            mixed = tf.raw_ops.TensorStridedSliceUpdate(input=pred, begin=tf.stack([i]), end=tf.stack([i + 2]),
                                                        strides=[1], value=pred[:2] * 0.5 + y[3:])
            loss = tf.reduce_mean(tf.square(mixed - y))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        at = tf.stack([tf.argmax(tf.reduce_sum(x, 1), output_type=tf.int32) + 5, 0])  # past the end: clamped
        buffer.assign(keras.ops.slice_update(buffer, at, mixed[:3]))
        return loss

    return step


def test_tensor_slice_updates_at_a_computed_row_as_tf(tmp_path):
    _as_tf(_update_step, 96, tmp_path, ["StridedSliceGrad", "SelectV2"], rows=8, high=4)


# name -> (begin, end of the computed i, masks, the update's shape): rows i:i + 2, row i (shrunk), rows i: (end_mask)
_FORMS = {"rows": (lambda i: [i, 1], lambda i: [i + 2, 3], {}, (2, 2)),
          "row": (lambda i: [i, 1], lambda i: [i + 1, 3], {"shrink_axis_mask": 1}, (2,)),
          "tail": (lambda i: [i, 0], lambda i: [i, 0], {"end_mask": 0b11}, (2, 3))}


@pytest.mark.parametrize("i", [0, 2, 3, 4, 5, 6, -1, -2, -3, -5, -6, -7])
@pytest.mark.parametrize("form", list(_FORMS))
def test_tensor_strided_slice_update_bitwise_tf(form, i):
    """Over TF's range rules: negative i from the end, an empty range writes nothing; what TF refuses (a range
    clamped short, a shrunk index out of range) is refused naming the node."""
    begin, end, masks, shape = _FORMS[form]

    @tf.function
    def update(x, u, i):
        return tf.raw_ops.TensorStridedSliceUpdate(input=x, begin=tf.stack(begin(i)), end=tf.stack(end(i)),
                                                   strides=[1, 1], value=u, **masks)

    _, session = _session(update, S((5, 3), tf.float32), S(shape, tf.float32), S((), tf.int32))
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    u = np.array([np.nan, -0.0, np.inf, -1.0, 0.5, 2.0], np.float32)[:np.prod(shape)].reshape(shape)
    try:
        want = update(x, u, np.int32(i)).numpy()
    except tf.errors.InvalidArgumentError:
        with pytest.raises(graph_ir.GraphError, match=r"StridedSliceGrad '.*spread'"):
            session.run_graph(0, [x, u, np.int32(i)])
        return
    got = session.run_graph(0, [x, u, np.int32(i)])[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("start", [(1, 1, 0), (3, 4, 0), (-2, 0, 1), (0, 2, 9), (7, -9, 0)])
@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_xla_dynamic_update_slice_at_computed_starts_bitwise_tf(start, dtype):
    """keras.ops.slice_update's op with start indices fed: clamped into the input as XLA clamps them."""
    rng = np.random.default_rng(98)
    x, update = (rng.standard_normal(s) * 3 for s in ((4, 5, 2), (2, 3, 2)))
    if dtype == "float32":
        x[0, 0, 0], update[0, 0, 0] = np.nan, -0.0
    x, update = (v.astype(dtype) if dtype != "bool" else v > 0 for v in (x, update))
    fn = tf.function(lambda x, u, i: xla.dynamic_update_slice(x, u, i))
    _, session = _session(fn, S(x.shape, dtype), S(update.shape, dtype), S((3,), tf.int32))
    got, want = session.run_graph(0, [x, update, np.int32(start)])[0], fn(x, update, np.int32(start)).numpy()
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype and np.array_equal(np.signbit(got), np.signbit(want)) | (dtype == "bool")
