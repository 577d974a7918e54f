"""CTCLoss (graph_ir/opset/ctc.py, graph_ir/executors/ctc.py) against tf.raw_ops.CTCLoss, lowered from a
tf.function, saved as .air and reloaded: every attribute combination on logits with ties, zeros and negatives, odd
sizes, repeated labels, trailing blanks, sequence lengths below max_time and 0, labels longer than the time they
get, entries without a valid path; bad inputs refused by name as TF refuses them. Then K training steps with
tf.compat.v1.nn.ctc_loss as keras.backend.ctc_batch_cost computes it (sparse labels given to the step: their
tf.where is another op), and with the dense tf.nn.ctc_loss / keras.ops.ctc_loss (TF's While loops, no CTCLoss),
against K (3) steps of TF.

Tolerance: the softmax is Eigen's exp and sum, LogSumExp glibc's log1pf, as TF's build rounds them
(graph_ir/executors/tf_float32.py, bitwise: tests/graph_ir/test_tf_float32.py), so the loss is within 2 ulps of TF's (bitwise on the
tested inputs). The gradient is softmax(inputs) - exp(log occupancy - log p), both log values of about the loss's
size, so where a logf or expf rounds an ulp away from glibc's (graph_ir uses correctly rounded ones) an entry can
move by an ulp of the loss: each is within 2 (ulp(loss) + ulp(1))."""

from __future__ import annotations

import itertools
import tracemalloc

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import layers

import graph_ir
from graph_ir import ops
from graph_ir.executors import EXECUTORS, WORKSPACE
from graph_ir.ir import registry
from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.nodes import TensorDesc
from tests.helpers.train_steps import K, lower_and_compare

TESTED = ("CTCLoss",)  # within the bounds above (tests/graph_ir/test_family_ops.py PER_OP_TESTS)
ATTRS = [dict(zip(("preprocess_collapse_repeated", "ctc_merge_repeated", "ignore_longer_outputs_than_inputs"), v))
         for v in itertools.product((False, True), repeat=3)]


def _sparse(labels: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    indices = np.array([(b, i) for b, seq in enumerate(labels) for i in range(len(seq))], np.int64).reshape(-1, 2)
    return indices, np.array([v for seq in labels for v in seq], np.int32)


def _logits(rng, steps: int, batch: int, classes: int, scale: float = 3.0, dtype=np.float32) -> np.ndarray:
    x = (rng.standard_normal((steps, batch, classes)) * scale).astype(dtype)
    flat = x.reshape(-1)
    flat[::5] = 0  # zeros
    flat[1::7] = flat[-1]  # ties
    return x


def _cases(ignore: bool) -> list[tuple[np.ndarray, list[list[int]], np.ndarray]]:
    """(inputs, labels, sequence_length); labels longer than their time only when `ignore`."""
    rng = np.random.default_rng(48)
    cases = [
        (_logits(rng, 7, 3, 5), [[0, 1, 2], [3, 3, 1], [2]], np.array([7, 5, 3], np.int32)),  # a repeat, shorter
        (_logits(rng, 11, 4, 9, 8.0), [[1, 1, 1, 4], [7, 0, 7, 7, 2], [6, 8], [5]], np.array([11, 9, 2, 6], np.int32)),
        (_logits(rng, 4, 2, 3, 0.5), [[0, 0, 0, 0], [1, 0]], np.array([4, 4], np.int32)),  # no path when merging
        (_logits(rng, 13, 2, 17), [[3, 16, 16], [15, 2, 2, 9, 0, 11]], np.array([13, 8], np.int32)),  # blanks last
        (_logits(rng, 1, 2, 2), [[0], [0]], np.array([1, 1], np.int32)),
    ]
    if ignore:  # labels longer than their time, and a sequence_length of 0: loss 0, gradient 0
        cases.append((_logits(rng, 5, 3, 4), [[0, 1, 2, 0, 1, 2], [1, 2], [2, 2]], np.array([5, 0, 5], np.int32)))
    return cases


def _assert_as_tf(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    (loss, grad), (tf_loss, tf_grad) = got, want
    assert loss.dtype == tf_loss.dtype and grad.shape == tf_grad.shape
    finite = np.isfinite(tf_loss)
    np.testing.assert_array_equal(np.isfinite(loss), finite)
    ulps = np.spacing(np.abs(np.where(finite, tf_loss, 0)).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(np.where(finite, loss, 0) - np.where(finite, tf_loss, 0)) <= 2 * ulps), (loss, tf_loss)
    bound = 2 * (ulps + np.finfo(np.float32).eps)
    worst = np.abs(grad.astype(np.float64) - tf_grad).max(axis=(0, 2), initial=0) / bound
    assert np.all(worst <= 1), worst


def _run(tmp_path, x: np.ndarray, labels, seq_len: np.ndarray, attrs: dict) -> list[np.ndarray]:
    indices, values = _sparse(labels)

    def ctc(x, indices, values, seq_len):
        return tf.raw_ops.CTCLoss(inputs=x, labels_indices=indices, labels_values=values, sequence_length=seq_len,
                                  **attrs)

    fn = tf.function(ctc)
    specs = [tf.TensorSpec(a.shape, tf.as_dtype(a.dtype)) for a in (x, indices, values, seq_len)]
    path = str(tmp_path / "ctc.air")
    graph_ir.from_tensorflow(fn, *specs).save(path)
    graph = graph_ir.load(path)
    (node,) = graph.nodes_of_type("CTCLoss")
    assert {k: node.attrs[k] for k in attrs} == attrs
    session = graph_ir.Session()
    session.add_graph(0, graph)
    got = session.run_graph(0, [x, indices, values, seq_len])
    _assert_as_tf(got, [t.numpy() for t in fn(x, indices, values, seq_len)])
    return got


@pytest.mark.parametrize("attrs", ATTRS, ids=lambda a: "-".join(k[:8] for k, v in a.items() if v) or "defaults")
def test_ctc_loss_as_tf(attrs, tmp_path):
    for x, labels, seq_len in _cases(attrs["ignore_longer_outputs_than_inputs"]):
        loss, grad = _run(tmp_path, x, labels, seq_len, attrs)
        assert np.all(grad[:, seq_len == 0] == 0) and np.all(loss[seq_len == 0] == 0)


def test_ctc_loss_of_float64_and_no_valid_path(tmp_path):
    rng = np.random.default_rng(7)
    x = _logits(rng, 6, 3, 5, dtype=np.float64)
    merging = {"preprocess_collapse_repeated": False, "ctc_merge_repeated": True,
               "ignore_longer_outputs_than_inputs": False}
    loss, grad = _run(tmp_path, x, [[1, 2, 3], [2, 2, 2, 2], [0]], np.array([6, 4, 2], np.int32), merging)
    assert np.isinf(loss[1]) and np.all(np.abs(grad[:4, 1].sum(axis=-1) - 1) < 1e-12)  # the gradient is y


# (case, labels, sequence_length, attrs, field, TF's own words): each refused by TF and, naming the field, by graph_ir.
_L, _S = [[0, 1], [2]], [3, 3]
REFUSED = [
    ("out-of-order", ([(0, 1), (0, 0), (1, 0)], [0, 1, 2]), _S, {}, "labels_indices", "out of order"),
    ("repeated", ([(0, 0), (0, 0), (1, 0)], [0, 1, 2]), _S, {}, "labels_indices", "repeated"),
    ("batch-out-of-range", ([(0, 0), (2, 0)], [0, 1]), _S, {}, "labels_indices", "out of bounds"),
    ("empty-entry", ([(0, 0), (0, 1)], [0, 1]), _S, {}, "labels_values", "holds no label for batch entry 1"),
    ("negative-label", _sparse([[0, -1], [2]]), _S, {}, "labels_values", "must be non-negative"),
    ("label-after-blank", _sparse([[3, 1], [2]]), _S, {}, "labels_values", "after a blank"),
    ("all-blanks", _sparse([[3], [2]]), _S, {}, "labels_values", "all blanks"),
    ("too-long", _sparse(_L), [1, 3], {}, "sequence_length", "is 1 for batch entry 0: not enough time"),
    ("beyond-max-time", _sparse(_L), [4, 3], {}, "sequence_length", r"is 4 for batch entry 0, not in \[0, max_time = 3"),
    ("negative-length", _sparse(_L), [3, -1], {}, "sequence_length", "is -1 for batch entry 1, not in"),
]


@pytest.mark.parametrize("case, labels, seq_len, attrs, field, words", REFUSED, ids=[r[0] for r in REFUSED])
def test_bad_inputs_are_refused_by_name(case, labels, seq_len, attrs, field, words):
    indices, values = (np.array(a, d).reshape(s) for a, d, s in zip(labels, (np.int64, np.int32), ((-1, 2), -1)))
    x = _logits(np.random.default_rng(1), 3, 2, 4)
    seq_len = np.array(seq_len, np.int32)
    if case != "all-blanks":  # TF reads out of bounds on those: graph_ir refuses them
        with pytest.raises(tf.errors.InvalidArgumentError):
            tf.raw_ops.CTCLoss(inputs=x, labels_indices=indices, labels_values=values, sequence_length=seq_len)
    fn = tf.function(lambda *a: tf.raw_ops.CTCLoss(inputs=a[0], labels_indices=a[1], labels_values=a[2],
                                                   sequence_length=a[3], **attrs))
    args = [x, indices, values, seq_len]
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.from_tensorflow(fn, *(tf.TensorSpec(a.shape, a.dtype) for a in args)))
    with pytest.raises(graph_ir.GraphError, match=rf"CTCLoss '[^']+': input '{field}'.*{words}"):
        session.run_graph(0, args)


def test_shapes_are_checked_when_building():
    with graph_ir.Graph("g"):
        x, seq = graph_ir.Const(np.zeros((3, 2, 4), np.float32)), graph_ir.Const(np.zeros(2, np.int32))
        indices, values = graph_ir.Const(np.zeros((1, 2), np.int64)), graph_ir.Const(np.zeros(1, np.int32))
        with pytest.raises(graph_ir.GraphError, match="CTCLoss 'c': input 'labels_indices' must have shape"):
            ops.CTCLoss(x, graph_ir.Const(np.zeros((1, 3), np.int64)), values, seq, name="c")
        with pytest.raises(graph_ir.GraphError, match="input 'sequence_length' must have shape \\[batch\\]"):
            ops.CTCLoss(x, indices, values, graph_ir.Const(np.zeros(3, np.int32)), name="c")
        loss, grad = ops.CTCLoss(x, indices, values, seq, name="c")
    assert loss.shape == (2,) and grad.shape == (3, 2, 4)
    # labels computed in the step (tf.where): a template graph's count of them is -1 (graph_ir/dynamic)
    op = registry.get("CTCLoss")
    descs = [TensorDesc("x", as_dtype(d), s) for d, s in (("float32", (3, 2, 4)), ("int64", (-1, 2)),
                                                            ("int32", (-1,)), ("int32", (2,)))]
    assert [d.shape for d in op.infer(op, "c", descs, {})] == [(2,), (3, 2, 4)]


@pytest.mark.parametrize("steps, batch, classes, length", [(40, 6, 12, 30), (5, 2, 200, 3), (20, 3, 50, 20)])
def test_the_workspace_bounds_what_the_executor_holds(steps, batch, classes, length):
    rng = np.random.default_rng(9)
    indices, values = _sparse([list(rng.integers(0, classes - 1, length)) for _ in range(batch)])
    args = [_logits(rng, steps, batch, classes), indices, values, np.full(batch, steps, np.int32)]
    with graph_ir.Graph("g") as graph:
        ops.CTCLoss(*(graph_ir.Const(a) for a in args))
    (node,) = graph.nodes_of_type("CTCLoss")
    run = EXECUTORS["CTCLoss"]
    run(node, args)  # libm's log1pf probed once
    tracemalloc.start()
    outputs = run(node, args)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak <= sum(o.nbytes for o in outputs) + WORKSPACE["CTCLoss"](node)


# The training steps: a Conv1D + Dense softmax model on [batch, time, features].
BATCH, TIME, FEATURES, CLASSES, LABELS = 3, 9, 4, 6, 7


def _model() -> keras.Model:
    return keras.Sequential([keras.Input((TIME, FEATURES)), layers.Conv1D(5, 3, padding="same", activation="tanh"),
                             layers.Dense(CLASSES, activation="softmax")])


def _compare(tmp_path, step, specs, batch, model, optimizer, tolerance: float = 1e-5) -> graph_ir.Graph:
    state = [*model.variables, *optimizer.variables]
    graph, differences, output_difference = lower_and_compare(step, specs, batch, state, str(tmp_path))
    assert output_difference <= tolerance, output_difference
    assert differences and max(differences.values()) <= tolerance, differences
    return graph


@pytest.mark.parametrize("blank", ["last", "first"])
def test_sparse_ctc_training_steps_as_tf(blank, tmp_path):
    """keras.backend.ctc_batch_cost's arithmetic on given sparse labels: log(y_pred + epsilon) time-major, then
    tf.compat.v1.nn.ctc_loss (CTCLoss, whose gradient passes a PreventGradient), GradientTape and Adam; or
    tf.nn.ctc_loss of sparse labels with blank_index=0 (CTCLoss on logits rolled by one class)."""
    keras.utils.set_random_seed(48)
    model, optimizer = _model(), keras.optimizers.Adam(1e-2)

    @tf.function
    def step(x, indices, values, seq_len):
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            logits = tf.math.log(tf.transpose(y_pred, [1, 0, 2]) + keras.backend.epsilon())
            if blank == "last":
                loss = tf.compat.v1.nn.ctc_loss(tf.SparseTensor(indices, values, [BATCH, TIME]), logits, seq_len)
            else:
                labels = tf.SparseTensor(indices, values + 1, [BATCH, TIME])
                loss = tf.nn.ctc_loss(labels, logits, None, seq_len, blank_index=0)
            loss = tf.reduce_mean(loss)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    rng = np.random.default_rng(5)
    lengths = [3, 1, 3]  # LABELS labels in all

    def batch(k):
        labels = [list(rng.integers(0, CLASSES - 1, n)) for n in lengths]
        return (rng.standard_normal((BATCH, TIME, FEATURES)).astype(np.float32), *_sparse(labels),
                np.array([TIME, TIME - 2, 5], np.int32))

    specs = [tf.TensorSpec((BATCH, TIME, FEATURES)), tf.TensorSpec((LABELS, 2), tf.int64),
             tf.TensorSpec((LABELS,), tf.int32), tf.TensorSpec((BATCH,), tf.int32)]
    assert not graph_ir.missing_ops(step, *specs)
    graph = _compare(tmp_path, step, specs, batch, model, optimizer)
    assert len(graph.nodes_of_type("CTCLoss")) == 1
    # labels longer than their sequence: refused naming the node, before any variable is written
    session = graph_ir.Session()
    session.add_graph(0, graph)
    names = [n.name for n in graph.nodes_of_type("Variable")]
    before = session.get_variables(names)
    x, indices, values, _ = batch(K)
    with pytest.raises(graph_ir.GraphError, match="CTCLoss '[^']+': input 'sequence_length' is 2 for batch entry 0: not enough"):
        session.run_graph(0, [x, indices, values, np.array([2, 2, 2], np.int32)])
    for name, old, new in zip(names, before, session.get_variables(names), strict=True):
        np.testing.assert_array_equal(old, new, err_msg=name)


@pytest.mark.parametrize("loss_fn", ["tf.nn.ctc_loss", "keras.ops.ctc_loss"])
def test_dense_ctc_training_steps_as_tf(loss_fn, tmp_path):
    """The dense CTC of tf.nn.ctc_loss and keras.ops.ctc_loss: TF's forward-backward in While loops (tf.scan's
    functions, called by name), no CTCLoss op; the blank is the last class, as in ctc_batch_cost."""
    keras.utils.set_random_seed(49)
    model, optimizer = _model(), keras.optimizers.Adam(1e-2)
    width = 4

    def ctc(labels, y_pred, label_length):
        logits = tf.math.log(y_pred + keras.backend.epsilon())
        if loss_fn == "keras.ops.ctc_loss":  # its mask_index is the blank
            return keras.ops.ctc_loss(labels, logits, label_length, tf.fill([BATCH], TIME), mask_index=CLASSES - 1)
        return tf.nn.ctc_loss(labels, logits, label_length, tf.fill([BATCH], TIME), logits_time_major=False,
                              blank_index=-1)

    @tf.function
    def step(x, labels, label_length):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(ctc(labels, model(x, training=True), label_length))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    rng = np.random.default_rng(6)

    def batch(k):
        return (rng.standard_normal((BATCH, TIME, FEATURES)).astype(np.float32),
                rng.integers(0, CLASSES - 1, (BATCH, width)).astype(np.int32), np.array([4, 2, 3], np.int32))

    specs = [tf.TensorSpec((BATCH, TIME, FEATURES)), tf.TensorSpec((BATCH, width), tf.int32),
             tf.TensorSpec((BATCH,), tf.int32)]
    assert not graph_ir.missing_ops(step, *specs)
    graph = _compare(tmp_path, step, specs, batch, model, optimizer)
    assert not graph.nodes_of_type("CTCLoss") and graph.nodes_of_type("While")
