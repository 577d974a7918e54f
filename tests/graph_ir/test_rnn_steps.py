"""Keras recurrent sequence classifiers lowered to GE and run K steps in graph_ir.Session beside K steps of
TensorFlow with FusedEmaAdam and PowerSign: LSTM, GRU, SimpleRNN and Bidirectional(LSTM), unrolled (unroll=True: the
time steps traced one by one, Unpack lowered by the slicing family) and not (Keras's rnn loop: a While whose body
reads the step's input from a TensorList and the kernels inside the loop, and its gradient: a StatelessWhile that
pops the intermediates the forward loop pushed onto TensorLists; graph_ir/lowering/control.py and
graph_ir/lowering/ops/tensorlist.py). Tolerance: every weight, slot and counter and the loss within 1e-5 of its own
scale (FLOAT32_TOLERANCE). Measured (K = 3), state / loss scaled: LSTM 2.3e-7 / 1e-7 (loop), 2.6e-7 / 1e-7
(unrolled); GRU 1.9e-7 / 1e-7 both; SimpleRNN 3.8e-7 / 1.1e-7 (loop), 3.8e-7 / 7.9e-8 (unrolled); Bidirectional(LSTM)
2.8e-7 / 1.1e-7 (loop), 2.7e-7 / 0 (unrolled); the larger of PowerSign and FusedEmaAdam."""

from __future__ import annotations

import keras
import pytest
import tensorflow as tf
from keras import layers

from tests.graph_ir.test_lowering_steps import FLOAT32_TOLERANCE, OPTIMIZERS, SPARSE_XENT
from tests.helpers import train_steps

# The TF ops the loop steps lower, asserted in their graphs (tests/graph_ir/test_family_ops.py reads it).
TESTED = ("While", "StatelessWhile", "TensorListFromTensor", "TensorListGetItem", "TensorListPushBack",
          "TensorListPopBack", "TensorListStack")
RNNS = {
    "lstm": lambda unroll: layers.LSTM(5, unroll=unroll),
    "gru": lambda unroll: layers.GRU(5, unroll=unroll),
    "simple_rnn": lambda unroll: layers.SimpleRNN(5, unroll=unroll),
    "bidirectional_lstm": lambda unroll: layers.Bidirectional(layers.LSTM(3, unroll=unroll)),
}


def _types(graph) -> set[str]:
    return {n.type for g in (graph, *graph.subgraphs.values()) for n in g.nodes.values()}


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("unroll", [False, True], ids=["loop", "unrolled"])
@pytest.mark.parametrize("rnn", list(RNNS))
def test_sequence_classifier_step(rnn, unroll, optimizer, tmp_path):
    keras.utils.set_random_seed(60)
    model = keras.Sequential([keras.Input((6, 4)), RNNS[rnn](unroll), layers.Dense(3)])
    opt = OPTIMIZERS[optimizer]()
    step = train_steps.train_step(model, SPARSE_XENT, opt)
    specs = [tf.TensorSpec((5, 6, 4), tf.float32), tf.TensorSpec((5,), tf.int32)]
    batch = train_steps.batches(61, *specs, y_high=3)
    step(*batch(-2))  # builds the optimizer's slots, so that they are compared too
    graph, differences, loss = train_steps.lower_and_compare(step, specs, batch, [*model.variables, *opt.variables],
                                                             str(tmp_path))
    types = _types(graph)
    if unroll:
        assert "While" not in types and "Unpack" in types, sorted(types)
    else:
        assert {"While", "StatelessWhile", "TensorListFromTensor", "TensorListGetItem", "TensorListPushBack",
                "TensorListPopBack", "TensorListStack"} <= types, sorted(types)
    assert len(differences) > len(model.trainable_variables)  # the slots too
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert loss <= FLOAT32_TOLERANCE


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_stacked_sequence_classifier_step(optimizer, tmp_path):
    """LSTM(return_sequences=True) into GRU(go_backwards=True): the first loop's outputs stacked from a TensorList,
    and in the gradient lists summed (AddN on lists), started from zeros (ZerosLike on a list) and sized by what the
    forward loop accumulated (TensorListLength popped back). Measured (K = 3): state 2.3e-7, loss 1.1e-7."""
    keras.utils.set_random_seed(62)
    model = keras.Sequential([keras.Input((7, 4)), layers.LSTM(6, return_sequences=True),
                              layers.GRU(5, go_backwards=True), layers.Dense(3)])
    opt = OPTIMIZERS[optimizer]()
    step = train_steps.train_step(model, SPARSE_XENT, opt)
    specs = [tf.TensorSpec((5, 7, 4), tf.float32), tf.TensorSpec((5,), tf.int32)]
    batch = train_steps.batches(63, *specs, y_high=3)
    step(*batch(-2))
    graph, differences, loss = train_steps.lower_and_compare(step, specs, batch, [*model.variables, *opt.variables],
                                                             str(tmp_path))
    assert sum(n.type == "While" for n in graph.nodes.values()) == 2
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert loss <= FLOAT32_TOLERANCE
