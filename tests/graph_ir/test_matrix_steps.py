"""Whole training steps that need the matrix family, lowered to GE as one graph and run K steps in graph_ir.Session
beside K steps in TensorFlow with PowerSign and FusedEmaAdam: a causal self-attention (a band_part(ones) mask, and
band_part on the attention weights), a triplet-style loss mining the hardest negatives with tf.math.top_k, and an
orthogonality penalty ||W^T W - I||^2 with tf.eye (folded into a Const at n = 4, a MatrixDiagV3 node at n = 70) and
tf.linalg.diag_part / set_diag (whose gradients hold MatrixDiagV3, MatrixSetDiagV3, MatrixDiagPartV3).
Tolerance: every weight, slot and counter and the loss within 1e-5 of its own scale (FLOAT32_TOLERANCE: the
matmuls and reductions are not bitwise Eigen's; the matrix ops themselves are).
Measured (K = 3): state within 2.4e-7 scaled, the losses within 1.9e-7."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from graph_ir.executors.folding import FOLD_LIMIT
from tests.graph_ir.test_lowering_steps import FLOAT32_TOLERANCE, OPTIMIZERS
from tests.helpers import train_steps


def _types(graph) -> set[str]:
    return {n.type for n in graph.nodes.values()}


def _variable(seed: int, *shape, scale: float = 0.5) -> tf.Variable:
    return tf.Variable((np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32))


def _compare(step, specs, batch, variables, optimizer, tmp_path):
    optimizer.build(variables)  # its slots and counters exist now: all of them are compared
    graph, differences, loss = train_steps.lower_and_compare(step, specs, batch, [*variables, *optimizer.variables],
                                                             str(tmp_path))
    assert len(differences) == len(variables) + len(optimizer.variables) - len(graph.frozen_variables)
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert loss <= FLOAT32_TOLERANCE
    return graph


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_causal_self_attention_step(optimizer, tmp_path):
    t, d = 5, 4
    wq, wk, wv, wo = (_variable(40 + k, d, d) for k in range(4))
    variables, opt = [wq, wk, wv, wo], OPTIMIZERS[optimizer]()

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            q, k, v = (tf.einsum("btd,de->bte", x, w) for w in (wq, wk, wv))
            mask = tf.linalg.band_part(tf.ones((t, t)), -1, 0)  # causal: a constant, folded
            scores = tf.matmul(q, k, transpose_b=True) / 2.0 + (1.0 - mask) * -1e9
            weights = tf.linalg.band_part(tf.exp(scores - tf.reduce_max(scores, -1, keepdims=True)), -1, 0)
            attention = weights / tf.reduce_sum(weights, -1, keepdims=True)
            h = tf.einsum("bts,bsd,de->bte", attention, v, wo)
            loss = tf.reduce_mean(tf.square(h - y))
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    specs = [tf.TensorSpec((3, t, d), tf.float32), tf.TensorSpec((3, t, d), tf.float32)]
    graph = _compare(step, specs, train_steps.batches(41, *specs), variables, opt, tmp_path)
    assert "MatrixBandPart" in _types(graph), sorted(_types(graph))


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_triplet_loss_with_top_k_hardest_negatives_step(optimizer, tmp_path):
    w, u = _variable(50, 6, 5), _variable(51, 5, 4)
    variables, opt = [w, u], OPTIMIZERS[optimizer]()

    @tf.function
    def step(x, labels):
        with tf.GradientTape() as tape:
            e = tf.tanh(x @ w) @ u
            norms = tf.reduce_sum(tf.square(e), 1)
            distances = norms[:, None] + norms[None, :] - 2.0 * tf.matmul(e, e, transpose_b=True)
            same = tf.cast(tf.equal(labels[:, None], labels[None, :]), tf.float32)
            hardest_positive = tf.reduce_max(distances * same, 1)
            nearest_negatives = -tf.math.top_k(-(distances + same * 1e3), k=3).values  # the 3 closest negatives
            loss = tf.reduce_mean(tf.nn.relu(hardest_positive[:, None] - nearest_negatives + 0.5))
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    specs = [tf.TensorSpec((8, 6), tf.float32), tf.TensorSpec((8,), tf.int32)]
    graph = _compare(step, specs, train_steps.batches(52, *specs, y_high=3), variables, opt, tmp_path)
    assert {"TopKV2", "ScatterNd"} <= _types(graph), sorted(_types(graph))


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("n", [4, 70])
def test_orthogonality_penalty_with_eye_step(optimizer, n, tmp_path):
    """tf.eye(n) is a MatrixDiagV3 of Consts: folded into a Const while lowering when its n * n elements fit
    FOLD_LIMIT (n = 4), kept as a MatrixDiagV3 node otherwise (n = 70); either way TF's identity matrix."""
    w, v = _variable(60 + n, n + 2, n, scale=0.2), _variable(61 + n, n, 2)
    variables, opt = [w, v], OPTIMIZERS[optimizer]()

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            gram = tf.matmul(w, w, transpose_a=True)
            orthogonality = tf.reduce_sum(tf.square(gram - tf.eye(n)))
            off_diagonal = tf.reduce_sum(tf.square(tf.linalg.set_diag(gram, tf.zeros(n))))
            diagonal = tf.reduce_sum(tf.square(tf.linalg.diag_part(gram, k=(-1, 1)) - 1.0))
            loss = tf.reduce_mean(tf.square(x @ w @ v - y)) + 0.1 * orthogonality + 0.01 * (off_diagonal + diagonal)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    specs = [tf.TensorSpec((5, n + 2), tf.float32), tf.TensorSpec((5, 2), tf.float32)]
    graph = _compare(step, specs, train_steps.batches(62, *specs), variables, opt, tmp_path)
    assert {"MatrixSetDiagV3", "MatrixDiagPartV3"} <= _types(graph), sorted(_types(graph))
    # tf.eye's MatrixDiagV3 has a Const diagonal (the gradient of diag_part's band holds another, of the gradient)
    eyes = [node for node in graph.nodes.values() if node.type == "MatrixDiagV3" and node.inputs[0].node.type == "Const"]
    assert len(eyes) == (n * n > FOLD_LIMIT), [node.name for node in eyes]
