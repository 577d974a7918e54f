"""Sizes known only from values, and the sparse updates of Keras's optimizers (issue 48, item 5).

- tf.where / tf.boolean_mask lower onto GE's Where, whose count the Session learns by running it: the graph runs part
  by part around it (graph_ir/runtime/segments.py), bitwise equal to TF at every count, 0 included (a float32 sum of
  the kept elements within 1e-6: another summation order than Eigen's).
- ResourceScatterAdd/Sub/Update (IndexedSlices written into a variable) lower onto GE's ScatterAdd/Sub/Update, in
  place, bitwise equal to TF with repeated indices; an index out of range is refused by name before any row changes.
- An Embedding's gradient is an IndexedSlices: every stock Keras optimizer's sparse path (SGD with and without
  momentum, RMSprop plain and centered with momentum, Adagrad, Adam, AdamW, Adadelta, Adamax, Nadam, Ftrl, Lion; and
  ours) lowers, and K steps match TF within the float32 step tolerance, 1e-5 of each tensor's scale. Keras's sparse
  division (a tf.cond around a Where when a divisor row is 0 or NaN) is run on both branches: Adagrad without epsilon
  takes the Where branch, and its NaN rows match TF's.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from tests.helpers import train_steps
from tests.helpers.lowering import session_values
from tf_plugin.optimizers import FusedEmaAdam, PowerSign

TESTED = ("Where", "ScatterNd")  # tests/graph_ir/test_family_ops.py PER_OP_TESTS (ScatterNd on bool here)
FLOAT32_TOLERANCE = 1e-5
VOCAB, DIM, BATCH, TOKENS = 23, 7, 5, 6


def _masked(x):
    """Where and boolean_mask at a count known only from x: the positive elements, their coordinates and sum."""
    kept = tf.boolean_mask(x, x > 0)
    return kept, tf.where(tf.math.is_nan(x) | (x < -0.5)), tf.reduce_sum(kept)


@pytest.mark.parametrize("shape", [(17,), (4, 5), (2, 3, 4)])
def test_where_and_boolean_mask_match_tf_at_every_count(shape):
    fn = tf.function(_masked)
    spec = tf.TensorSpec(shape, tf.float32)
    graph = graph_ir.from_tensorflow(fn, spec)
    assert "Where" in {n.type for n in graph.nodes.values()}
    session = graph_ir.Session()
    session.add_graph(0, graph)
    rng = np.random.default_rng(len(shape))
    for fill in (None, 1.0, -1.0, 0.0):  # a random mask, all kept, none kept, all zero
        x = rng.standard_normal(shape).astype(np.float32) if fill is None else np.full(shape, fill, np.float32)
        if fill is None:
            x.reshape(-1)[::5] = 0
            x.reshape(-1)[1::7] = np.nan
        got = session.run_graph(0, [x])
        want = [t.numpy() for t in fn(x)]
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(got[0], want[0])  # the kept elements and the coordinates: exact
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_allclose(got[2], want[2], rtol=1e-6)  # a float32 sum, in another order than Eigen's


def test_scatter_nd_on_bool_is_tf_logical_or_of_repeated_indices():
    fn = tf.function(lambda indices, updates: tf.scatter_nd(indices, updates, [7, 2]))
    specs = [tf.TensorSpec((5, 1), tf.int32), tf.TensorSpec((5, 2), tf.bool)]
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.from_tensorflow(fn, *specs))
    rng = np.random.default_rng(6)
    for _ in range(4):
        indices = rng.integers(0, 7, (5, 1)).astype(np.int32)
        indices[1] = indices[0]  # a repeat
        updates = rng.integers(0, 2, (5, 2)).astype(bool)
        np.testing.assert_array_equal(session.run_graph(0, [indices, updates])[0], fn(indices, updates).numpy())


def test_resource_scatters_match_tf_with_repeated_indices():
    rng = np.random.default_rng(5)
    var = tf.Variable(rng.standard_normal((9, 3)).astype(np.float32))

    @tf.function
    def step(indices, updates):
        var.scatter_add(tf.IndexedSlices(updates, indices))
        var.scatter_sub(tf.IndexedSlices(updates * 0.5, indices[::-1]))
        var.scatter_update(tf.IndexedSlices(updates[:3] + 1.0, indices[:3]))
        return tf.reduce_sum(var)

    specs = [tf.TensorSpec((6,), tf.int32), tf.TensorSpec((6, 3), tf.float32)]
    graph = graph_ir.from_tensorflow(step, *specs)
    assert {"ScatterAdd", "ScatterSub", "ScatterUpdate"} <= {n.type for n in graph.nodes.values()}
    session = graph_ir.Session()
    session.add_graph(0, graph)
    for k in range(train_steps.K):
        indices = np.array([0, 8, 3, 3, 0, 3], np.int32)[rng.permutation(6)]  # repeated, in a new order each step
        updates = rng.standard_normal((6, 3)).astype(np.float32)
        got = session.run_graph(0, [indices, updates])
        np.testing.assert_allclose(got[0], step(indices, updates).numpy(), rtol=1e-6)  # Eigen's summation order
        np.testing.assert_array_equal(session_values(graph, session, [var])[0], var.numpy())
    before = session_values(graph, session, [var])[0]
    with pytest.raises(graph_ir.GraphError, match=r"ScatterAdd .*indices\[2\] = 9 is not in \[0, 9\)"):
        session.run_graph(0, [np.array([1, 2, 9, 0, 0, 0], np.int32), np.ones((6, 3), np.float32)])
    np.testing.assert_array_equal(session_values(graph, session, [var])[0], before)


OPTIMIZERS = {
    "sgd": lambda: keras.optimizers.SGD(0.1),
    "sgd_momentum": lambda: keras.optimizers.SGD(0.1, momentum=0.9),
    "sgd_nesterov": lambda: keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
    "rmsprop": lambda: keras.optimizers.RMSprop(0.01),
    "rmsprop_centered_momentum": lambda: keras.optimizers.RMSprop(0.01, momentum=0.9, centered=True),
    "adagrad": lambda: keras.optimizers.Adagrad(0.1),
    "adam": lambda: keras.optimizers.Adam(0.01),
    "adamw": lambda: keras.optimizers.AdamW(0.01),
    "adadelta": lambda: keras.optimizers.Adadelta(1.0),
    "adamax": lambda: keras.optimizers.Adamax(0.01),
    "nadam": lambda: keras.optimizers.Nadam(0.01),
    "ftrl": lambda: keras.optimizers.Ftrl(0.1),
    "lion": lambda: keras.optimizers.Lion(0.01),
    "fused_ema_adam": lambda: FusedEmaAdam(0.01, weight_decay=0.01, ema_decay=0.9),
    "power_sign": lambda: PowerSign(0.01),
}
# Those whose sparse path writes the variable's rows (the others densify the IndexedSlices first).
WRITES_ROWS = {"sgd", "rmsprop", "adagrad", "adadelta"}


def _embedding_model(seed: int) -> keras.Model:
    keras.utils.set_random_seed(seed)
    tokens = keras.Input((TOKENS,), dtype="int32")
    x = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(VOCAB, DIM)(tokens))
    return keras.Model(tokens, keras.layers.Dense(3)(x))


def _sparse_step(name: str, optimizer, seed: int, tmp_path):
    model = _embedding_model(seed)
    step = train_steps.train_step(model, keras.losses.SparseCategoricalCrossentropy(from_logits=True), optimizer)
    specs = [tf.TensorSpec((BATCH, TOKENS), tf.int32), tf.TensorSpec((BATCH,), tf.int32)]
    batch = train_steps.batches(seed, *specs, x_high=VOCAB // 2, y_high=3)  # repeated tokens, untouched rows
    return train_steps.lower_and_compare(step, specs, batch, [*model.variables, *optimizer.variables], str(tmp_path))


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_sparse_updates_of_every_keras_optimizer_match_tf(name, tmp_path):
    graph, differences, output_difference = _sparse_step(name, OPTIMIZERS[name](), 40 + len(name), tmp_path)
    types = {n.type for g in (graph, *graph.subgraphs.values()) for n in g.nodes.values()}
    if name in WRITES_ROWS:
        assert types & {"ScatterAdd", "ScatterSub"}, types
    assert output_difference <= FLOAT32_TOLERANCE
    assert len(differences) >= 3
    for variable, difference in differences.items():
        assert difference <= FLOAT32_TOLERANCE, (variable, difference)


def test_keras_where_branch_of_a_sparse_division_matches_tf(tmp_path):
    """Adagrad without epsilon from zero accumulators divides by 0 at the rows no token touched: Keras's sparse
    divide takes its Where branch, which adds those rows as 0/0 = NaN, as TF does. (Each batch holds each token once:
    that branch of Keras's gathers out of range in TF itself when a token repeats.)"""
    optimizer = keras.optimizers.Adagrad(0.1, initial_accumulator_value=0.0, epsilon=0.0)
    model = _embedding_model(3)
    step = train_steps.train_step(model, keras.losses.SparseCategoricalCrossentropy(from_logits=True), optimizer)
    specs = [tf.TensorSpec((3, TOKENS), tf.int32), tf.TensorSpec((3,), tf.int32)]
    rng = np.random.default_rng(4)

    def batch(k: int) -> tuple[np.ndarray, np.ndarray]:
        tokens = rng.permutation(VOCAB)[:3 * TOKENS].reshape(3, TOKENS).astype(np.int32)
        return tokens, rng.integers(0, 3, 3).astype(np.int32)

    step(*batch(-1))
    graph = graph_ir.from_tensorflow(step, *specs)
    session = graph_ir.Session()
    session.add_graph(0, graph)
    for k in range(train_steps.K):
        args = batch(k)
        got, want = session.run_graph(0, list(args))[0], step(*args).numpy()
        assert np.isnan(got) == np.isnan(want)
        assert np.isnan(want) or train_steps.scaled_difference(got, want) <= FLOAT32_TOLERANCE
    table = model.layers[1].embeddings
    got, want = session_values(graph, session, [table])[0], table.numpy()
    assert np.isnan(got).any() and not np.isnan(got).all()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))  # the same rows added as 0/0
    finite = ~np.isnan(want)
    assert train_steps.scaled_difference(got[finite], want[finite]) <= FLOAT32_TOLERANCE


def test_rmsprop_on_an_embedding_through_fit_lowers_as_keras_train_function():
    """The translation example's idiom: compile("rmsprop") on a model with an Embedding, then its train_function."""
    model = _embedding_model(8)
    model.compile(optimizer="rmsprop", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    specs = (tf.TensorSpec((BATCH, TOKENS), tf.int32), tf.TensorSpec((BATCH,), tf.int32))
    batch = train_steps.batches(9, *specs, x_high=VOCAB, y_high=3)
    model.fit(*batch(-1), batch_size=BATCH, epochs=1, verbose=0)
    graph = graph_ir.from_tensorflow(model.train_function, specs)
    session = graph_ir.Session()
    session.add_graph(0, graph)
    for k in range(train_steps.K):
        x, y = batch(k)
        got = session.run_graph(0, [x, y])
        want = tf.nest.flatten(model.train_function(iter(tf.data.Dataset.from_tensors((x, y)))))
        assert train_steps.scaled_difference(got[0], want[0].numpy()) <= FLOAT32_TOLERANCE
    table = model.layers[1].embeddings
    assert train_steps.scaled_difference(session_values(graph, session, [table])[0], table.numpy()) \
        <= FLOAT32_TOLERANCE


def test_a_where_inside_a_loop_is_refused_naming_the_while():
    @tf.function
    def fn(x):
        return tf.while_loop(lambda i, s: i < 3,
                             lambda i, s: (i + 1, s + tf.cast(tf.size(tf.where(x > tf.cast(i, x.dtype))), x.dtype)),
                             (tf.constant(0), tf.constant(0.0)))[1]

    graph = graph_ir.from_tensorflow(fn, tf.TensorSpec((6,), tf.float32))
    with pytest.raises(graph_ir.GraphError, match=r"While .*holds a node whose sizes depend on values"):
        graph_ir.Session().add_graph(0, graph)
