"""Structural lowering gaps that refused real training steps, each lowered and run in graph_ir.Session beside TF:
bool masks sliced, transposed, gathered, tiled and selected (Gemma's and T5's `mask[:, None, :, :]`, a masked GRU's
transposed mask), Einsum with an ellipsis (RoFormerV2's `'...,a->...a'`), a captured constant tensor above TF's
128-element embedding threshold (Swin's relative-position index), micro-batch gradient accumulation slicing
`x[i*mb:(i+1)*mb]` inside tf.range (Asserts and graph_ir.missing_ops: tests/graph_ir/test_structure_refusals.py).

Tolerance: the ops moved here (slices, transposes, gathers, selects, Casts) are exact, so their forward values are
compared bitwise; whole steps (K = 3 with FusedEmaAdam) within FLOAT32_TOLERANCE (1e-5) of each tensor's own scale,
as the other step tests (the matmuls and reductions are not bitwise Eigen's). Measured (K = 3), state / loss scaled:
bool-mask attention 9.7e-10 / 0, masked GRU 2.9e-7 / 1.1e-7, rotary einsum 1.7e-8 / 7e-8, captured constants
3.8e-8 / 2.7e-7, micro-batch accumulation 0 / 0 (test_structure_refusals.py: global_clipnorm 5.3e-7 / 6.7e-8, guarded asserts
1.4e-7 / 1.1e-7)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import layers

import graph_ir
from tests.graph_ir.test_lowering_steps import FLOAT32_TOLERANCE, SPARSE_XENT
from tests.helpers import train_steps
from tf_plugin.optimizers import FusedEmaAdam

S = tf.TensorSpec


def _run(fn, *values):
    """fn lowered, run once in a Session on `values`, with TF's own results."""
    graph = graph_ir.from_tensorflow(fn, *[S(v.shape, tf.as_dtype(v.dtype)) for v in values])
    session = graph_ir.Session()
    session.add_graph(0, graph)
    got = session.run_graph(0, list(values))
    want = fn(*values)
    return graph, got, [w.numpy() for w in (want if isinstance(want, (list, tuple)) else [want])]


def _types(graph) -> set[str]:
    return {n.type for n in graph.nodes.values()}


def _variable(seed: int, shape, name: str) -> tf.Variable:
    return tf.Variable(np.random.default_rng(seed).standard_normal(shape).astype(np.float32), name=name)


def _step_compare(step, specs, batch, state, tmp_path):
    graph, differences, loss = train_steps.lower_and_compare(step, specs, batch, state, str(tmp_path))
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert loss <= FLOAT32_TOLERANCE
    return graph


# -- 1. bool masks -------------------------------------------------------------------------------------------------

_BOOL_OPS = {
    "strided_slice_new_axis": lambda m: m[:, None, :, :],
    "strided_slice_ellipsis": lambda m: m[..., :2],
    "strided_slice_reversed": lambda m: m[::-1, 1:, ::2],
    "slice": lambda m: tf.slice(m, [0, 1, 1], [2, 2, 3]),
    "transpose": lambda m: tf.transpose(m, [1, 0, 2]),
    "reshape": lambda m: tf.reshape(m, [6, 5]),
    "expand_dims": lambda m: tf.expand_dims(m, 1),
    "tile": lambda m: tf.tile(m, [1, 2, 1]),
    "concat": lambda m: tf.concat([m, tf.logical_not(m)], 1),
    "gather": lambda m: tf.gather(m, [2, 0, 2], axis=1),
    "select_v2": lambda m: tf.where(m[:, :1, :], m, tf.logical_not(m)),
    "select": lambda m: tf.raw_ops.Select(condition=m, x=m, y=tf.logical_not(m)),
}


@pytest.mark.parametrize("name", sorted(_BOOL_OPS))
def test_bool_masks_move_through_the_ops_tf_takes_them_in_bitwise(name):
    op = _BOOL_OPS[name]
    fn = tf.function(lambda m: op(m))
    mask = np.random.default_rng(1).standard_normal((2, 3, 5)) > 0
    graph, got, want = _run(fn, mask)
    assert got[0].dtype == np.bool_ and got[0].shape == want[0].shape
    np.testing.assert_array_equal(got[0], want[0])
    moved = {"StridedSlice", "Slice", "Transpose", "Tile", "GatherV2", "SelectV2"} & _types(graph)
    assert not moved or "Cast" in _types(graph)  # GE's REG_OPs of those declare no bool: uint8 between Casts


def test_bool_mask_attention_step(tmp_path):
    """A T5/Gemma-style masked attention step: the padding mask sliced to [B, 1, 1, T] and [B, 1, T, 1], transposed,
    and used by SelectV2 on the logits."""
    wq, wk = _variable(40, (4, 4), "wq"), _variable(41, (4, 4), "wk")
    optimizer = FusedEmaAdam(0.01)

    @tf.function
    def step(x, y):
        mask = x[..., 0] > -0.5  # [B, T] bool
        with tf.GradientTape() as tape:
            q, k = tf.einsum("btd,de->bte", x, wq), tf.einsum("btd,de->bte", x, wk)
            logits = tf.matmul(q, k, transpose_b=True)[:, None, :, :]  # [B, 1, T, T]
            keys = mask[:, None, None, :]
            rows = tf.transpose(mask[:, None, :, None], [0, 1, 2, 3])
            both = tf.logical_and(tf.tile(keys, [1, 1, 5, 1]), tf.gather(rows, [0, 1, 2, 3, 4], axis=2))
            masked = tf.where(both, logits, tf.fill(tf.shape(logits), -1e4))
            probs = tf.nn.softmax(masked, axis=-1)
            loss = tf.reduce_mean(tf.square(tf.reduce_sum(probs * logits, [1, 2, 3]) - y))
        grads = tape.gradient(loss, [wq, wk])
        optimizer.apply_gradients(zip(grads, [wq, wk]))
        return loss

    specs = [S((3, 5, 4), tf.float32), S((3,), tf.float32)]
    graph = _step_compare(step, specs, train_steps.batches(42, *specs), [wq, wk, *optimizer.variables], tmp_path)
    assert {"Cast", "StridedSlice", "Tile", "GatherV2", "SelectV2"} <= _types(graph), sorted(_types(graph))


def test_masked_gru_step(tmp_path):
    """Embedding(mask_zero=True) then GRU: Keras's rnn loop transposes the bool mask to time-major and selects with
    it in each step."""
    keras.utils.set_random_seed(80)
    model = keras.Sequential([keras.Input((6,), dtype="int32"), layers.Embedding(10, 4, mask_zero=True),
                              layers.GRU(5), layers.Dense(3)])
    optimizer = FusedEmaAdam(0.01)
    step = train_steps.train_step(model, SPARSE_XENT, optimizer)
    specs = [S((4, 6), tf.int32), S((4,), tf.int32)]
    _step_compare(step, specs, train_steps.batches(81, *specs, x_high=10, y_high=3),
                  [*model.variables, *optimizer.variables], tmp_path)


# -- 2. Einsum with an ellipsis ------------------------------------------------------------------------------------

@pytest.mark.parametrize("equation, shapes", [
    ("...,a->...a", [(2, 3), (4,)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),  # ellipsis dims broadcast: [2, 1] with [5]
    ("...ij,...jk->...ik", [(1, 3, 4), (6, 4, 2)]),
    ("i...,j...->...ij", [(3, 2, 1), (2, 1, 4)]),
    ("...i,...i->...", [(0, 3), (0, 3)]),  # empty
])
def test_einsum_with_an_ellipsis_as_tf(equation, shapes):
    rng = np.random.default_rng(2)
    values = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    values[0].reshape(-1)[::3] = 0
    _, got, want = _run(tf.function(lambda a, b: tf.einsum(equation, a, b)), *values)
    assert got[0].shape == want[0].shape
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)


def test_einsum_without_output_ellipsis_is_refused_as_tf_refuses_it():
    fn = tf.function(lambda a, b: tf.raw_ops.Einsum(inputs=[a, b], equation="...ij,...jk->ik"))
    with pytest.raises(graph_ir.LoweringError, match="ellipsis"):  # TF's own shape function refuses it first
        graph_ir.from_tensorflow(fn, S((2, 3, 4)), S((4, 5)))


def test_rotary_einsum_step(tmp_path):
    """RoFormerV2's rotary position code: inv_freq '...,a->...a', then '...ij,...jk->...ik' projections, trained."""
    w, v = _variable(50, (6, 4), "w"), _variable(51, (4, 3), "v")
    inv_freq = tf.constant(1.0 / 10000 ** (np.arange(0, 6, 2) / 6), tf.float32)
    optimizer = FusedEmaAdam(0.01)

    @tf.function
    def step(x, y):
        positions = tf.range(5, dtype=tf.float32)
        angles = tf.einsum("...,a->...a", positions, inv_freq)  # [5, 3]
        rotary = tf.concat([tf.sin(angles), tf.cos(angles)], -1)  # [5, 6]
        with tf.GradientTape() as tape:
            h = tf.einsum("...ij,...jk->...ik", x * rotary, w)  # [B, 5, 4]
            out = tf.einsum("...ij,...jk->...ik", tf.tanh(h), v)  # [B, 5, 3]
            loss = tf.reduce_mean(tf.square(tf.reduce_mean(out, 1) - y))
        grads = tape.gradient(loss, [w, v])
        optimizer.apply_gradients(zip(grads, [w, v]))
        return loss

    specs = [S((2, 5, 6), tf.float32), S((2, 3), tf.float32)]
    graph = _step_compare(step, specs, train_steps.batches(52, *specs), [w, v, *optimizer.variables], tmp_path)
    assert "Einsum" in _types(graph)


# -- 3. captured constant tensors ----------------------------------------------------------------------------------

def test_captured_constant_of_any_size_becomes_a_const(tmp_path):
    """Swin's relative-position index: a 256-element captured tensor (TF captures it as a Placeholder, above its
    128-element embedding threshold), gathered from a trained bias table."""
    index = tf.constant(np.random.default_rng(60).integers(0, 9, (16, 16)).astype(np.int32))  # 256 elements
    scale = tf.constant(np.linspace(0.5, 1.5, 300).astype(np.float32))  # 300 elements, float
    table, w = _variable(61, (9,), "table"), _variable(62, (4, 16), "w")
    optimizer = FusedEmaAdam(0.01)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            bias = tf.gather(tf.convert_to_tensor(table), index)  # [16, 16]
            h = tf.nn.softmax(x @ w + tf.reduce_mean(bias, 0))  # [B, 16]
            loss = tf.reduce_mean(tf.square(tf.reduce_sum(h * scale[:16], 1) * scale[299] - y))
        grads = tape.gradient(loss, [table, w])
        optimizer.apply_gradients(zip(grads, [table, w]))
        return loss

    specs = [S((3, 4), tf.float32), S((3,), tf.float32)]
    graph = _step_compare(step, specs, train_steps.batches(63, *specs), [table, w, *optimizer.variables], tmp_path)
    consts = [n for n in graph.nodes.values() if n.type == "Const" and n.attrs["value"].size >= 256]
    assert any(np.array_equal(n.attrs["value"], index.numpy()) for n in consts)


# -- 4. a slice with a computed begin and a static size ------------------------------------------------------------

def _accumulation_step(micro: int, count: int, w: tf.Variable, optimizer):
    @tf.function
    def step(x, y):
        grads = tf.zeros_like(w)
        total = tf.constant(0.0)
        for i in tf.range(count):
            with tf.GradientTape() as tape:
                xs, ys = x[i * micro:(i + 1) * micro], y[i * micro:(i + 1) * micro]
                loss = tf.reduce_mean(tf.square(tf.tanh(xs @ w)[:, 0] - ys))
            grads += tape.gradient(loss, w)
            total += loss
        optimizer.apply_gradients([(grads / tf.cast(count, tf.float32), w)])
        return total

    return step


def test_micro_batch_gradient_accumulation_step(tmp_path):
    w = _variable(70, (5, 3), "w")
    optimizer = FusedEmaAdam(0.01)
    step = _accumulation_step(2, 3, w, optimizer)
    specs = [S((6, 5), tf.float32), S((6,), tf.float32)]
    _step_compare(step, specs, train_steps.batches(71, *specs), [w, *optimizer.variables], tmp_path)


def test_computed_begin_rows_and_shrunk_axes_as_tf():
    def rows(x, m):
        total, flags = tf.zeros([2, 3]), tf.zeros([2])
        for i in tf.range(3):
            total += x[i, 1:3, i:i + 3]  # a shrunk axis, a constant range and a computed one
            flags += tf.cast(m[i * 2:(i + 1) * 2, -1], tf.float32)  # bool, a negative constant index
        return total, flags

    rng = np.random.default_rng(3)
    graph, got, want = _run(tf.function(rows), rng.standard_normal((3, 4, 6)).astype(np.float32),
                            rng.standard_normal((6, 3)) > 0)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    body = {n.type for sub in graph.subgraphs.values() for n in sub.nodes.values()}
    assert "Slice" in body and "StridedSlice" in body, sorted(body)  # the offsets read off the computed begin


def test_computed_begin_out_of_range_is_refused_at_run_time():
    """TF would clamp x[6:8] of 6 rows to an empty slice (another shape than the graph's static [2, 5]): the Session
    refuses it naming the node instead of returning something else."""
    w = _variable(72, (5, 3), "w_range")
    optimizer = FusedEmaAdam(0.01)
    step = _accumulation_step(2, 4, w, optimizer)  # 4 micro-batches of 2 rows, but 6 rows
    specs = [S((6, 5), tf.float32), S((6,), tf.float32)]
    graph = graph_ir.from_tensorflow(step, *specs)
    session = graph_ir.Session()
    session.add_graph(0, graph)
    before = session.get_variables([graph.variable_name(w)])[0]
    x, y = train_steps.batches(73, *specs)(0)
    with pytest.raises(Exception, match=r"Slice .*offsets\[0\] = 6"):
        session.run_graph(0, [x, y])
    np.testing.assert_array_equal(session.get_variables([graph.variable_name(w)])[0], before)


def test_computed_begin_with_a_computed_size_is_refused_naming_the_node():
    def uneven(x):
        total = tf.zeros([5])
        for i in tf.range(3):
            total += tf.reduce_sum(x[i:2 * i + 1], 0)
        return total

    with pytest.raises(graph_ir.LoweringError, match=r"StridedSlice .*strided_slice.*not a constant"):
        graph_ir.from_tensorflow(tf.function(uneven), S((6, 5), tf.float32))
