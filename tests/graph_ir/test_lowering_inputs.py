"""What graph_ir.from_tensorflow takes as a step's inputs: a tf.Variable argument becomes the GE Variable it is (run
K steps beside TF); Keras's model.train_function lowers as one step of fit on the batch's specs (run K steps beside
model.train_function itself); a dataset iterator, a tf.string argument, a variable argument of a ConcreteFunction and
every other failure is a LoweringError naming the argument or node, never a bare ValueError or TypeError.

Tolerance: the variable-argument step is elementwise float32 arithmetic, so bitwise; the Keras step within 1e-5 of
each tensor's scale (docs/lowering.md's float32 step tolerance)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from tests.helpers import train_steps
from tests.helpers.lowering import session_values
from tf_plugin.optimizers import FusedEmaAdam

FLOAT32_TOLERANCE = 1e-5
SPARSE_XENT = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def test_a_variable_argument_becomes_the_ge_variable_it_is():
    rng = np.random.default_rng(31)
    var = tf.Variable(rng.standard_normal(5).astype(np.float32), name="inputs/var")
    scale = tf.Variable(np.float32(0.5), name="inputs/scale")  # captured, beside the argument

    @tf.function
    def step(x, v):
        v.assign_add(x * scale)
        return v.read_value() * 2.0

    graph = graph_ir.from_tensorflow(step, tf.TensorSpec((5,), tf.float32), var)
    assert graph.nodes[graph.variable_name(var)].type == "Variable"
    assert [n.name for n in graph.nodes.values() if n.type == "Data"] == ["x"]  # run_graph takes x alone
    session = graph_ir.Session()
    session.add_graph(0, graph)
    for k in range(train_steps.K):
        x = rng.standard_normal(5).astype(np.float32)
        x[k] = 0.0
        (got,) = session.run_graph(0, [x])
        np.testing.assert_array_equal(got, step(x, var).numpy())
    (got_var,) = session.get_variables([graph.variable_name(var)])
    np.testing.assert_array_equal(got_var, var.numpy())


def test_a_variable_argument_of_a_concrete_function_is_refused_naming_it():
    var = tf.Variable(np.zeros(3, np.float32))

    @tf.function
    def step(weights, x):
        weights.assign_add(x)

    concrete = step.get_concrete_function(var, tf.TensorSpec((3,), tf.float32))
    with pytest.raises(graph_ir.LoweringError, match=r"argument 'weights' is a tf.Variable.*pass the tf.function"):
        graph_ir.from_tensorflow(concrete)


def test_an_iterator_and_a_string_argument_are_refused_naming_them():
    dataset = tf.data.Dataset.from_tensor_slices(np.zeros((4, 3), np.float32))

    @tf.function
    def from_iterator(batches):
        return next(batches) * 2.0

    with pytest.raises(graph_ir.LoweringError, match=r"argument 'batches' is a resource tensor \(a tf.data iterator"):
        graph_ir.from_tensorflow(from_iterator, iter(dataset))

    @tf.function
    def with_label(label, x):
        return x * 2.0

    with pytest.raises(graph_ir.LoweringError, match=r"argument 'label' is a string tensor, which GE graphs take none"):
        graph_ir.from_tensorflow(with_label, tf.TensorSpec((), tf.string), tf.TensorSpec((3,), tf.float32))


def test_every_failure_is_a_lowering_error():
    @tf.function
    def step(x):
        return tf.cast(x, tf.complex128)

    with pytest.raises(graph_ir.LoweringError, match=r"lowering TF Cast 'Cast': ValueError: .*dtype"):
        graph_ir.from_tensorflow(step, tf.TensorSpec((3,), tf.float32))
    with pytest.raises(graph_ir.LoweringError, match=r"tracing step with arguments .* failed: TypeError"):
        graph_ir.from_tensorflow(step)  # no argument to trace it with
    with pytest.raises(graph_ir.LoweringError, match=r"takes a tf.function.*got object") as wrong_kind:
        graph_ir.from_tensorflow(object())
    assert isinstance(wrong_kind.value, TypeError)  # as it was before it became a LoweringError
    with pytest.raises(graph_ir.LoweringError, match=r"fetches=\.\.\.\): say what Session.run would fetch"):
        graph_ir.from_tensorflow(tf.Graph())
    with pytest.raises(graph_ir.LoweringError, match=r"fetches and session are for a tf.Graph"):
        graph_ir.from_tensorflow(step, tf.TensorSpec((3,), tf.float32), fetches=["x"])


def _compiled_mlp(seed: int) -> keras.Model:
    keras.utils.set_random_seed(seed)
    model = train_steps.mlp()
    model.compile(optimizer=FusedEmaAdam(0.01), loss=SPARSE_XENT)
    return model


def test_keras_train_function_lowers_as_one_step_of_fit():
    model = _compiled_mlp(32)
    specs = (tf.TensorSpec((6, 12), tf.float32), tf.TensorSpec((6,), tf.int32))
    batch = train_steps.batches(33, *specs, y_high=5)
    model.fit(*batch(-1), batch_size=6, epochs=1, verbose=0)  # builds the optimizer and the train function
    with pytest.raises(graph_ir.LoweringError, match=r"Keras's step function.*pass the batch's specs"):
        graph_ir.from_tensorflow(model.train_function)
    with pytest.raises(graph_ir.LoweringError, match=r"got Sequential .*pass model.train_function and the batch's"):
        graph_ir.from_tensorflow(model)
    graph = graph_ir.from_tensorflow(model.train_function, specs)
    assert graph_ir.missing_ops(model.train_function, specs) == {}
    session = graph_ir.Session()
    session.add_graph(0, graph)
    for k in range(train_steps.K):
        x, y = batch(k)
        got = session.run_graph(0, [x, y])
        want = tf.nest.flatten(model.train_function(iter(tf.data.Dataset.from_tensors((x, y)))))
        assert len(got) == len(want) == 1  # the loss metric
        assert train_steps.scaled_difference(got[0], want[0].numpy()) <= FLOAT32_TOLERANCE
    state = [*model.variables, *model.optimizer.variables, *model.metrics_variables]
    held = [v for v in state if _held(graph, v)]
    assert len(held) > len(model.trainable_variables)
    for v, got in zip(held, session_values(graph, session, held)):
        assert train_steps.scaled_difference(got, v.numpy()) <= FLOAT32_TOLERANCE, v.path


def _held(graph, variable) -> bool:
    for lookup in (graph.variable_name, graph.flat_state_parts):
        try:
            lookup(variable)
            return True
        except KeyError:
            continue
    return False


def test_keras_iterator_function_lowers_on_a_dataset_with_a_static_batch():
    model = _compiled_mlp(34)
    model.make_train_function()
    multi_step = dict(zip(model.train_function.__code__.co_freevars,
                          (c.cell_contents for c in model.train_function.__closure__)))["multi_step_on_iterator"]
    data = (np.zeros((12, 12), np.float32), np.zeros(12, np.int32))
    fixed = tf.data.Dataset.from_tensor_slices(data).batch(6, drop_remainder=True)
    model.fit(fixed, epochs=1, verbose=0, shuffle=False)
    graph = graph_ir.from_tensorflow(multi_step, iter(fixed))
    assert [n.output_descs[0].shape for n in graph.nodes.values() if n.type == "Data"] == [(6, 12), (6,)]
    # A dataset that may end on a partial batch has a None batch: it lowers with GE's -1 (graph_ir/dynamic).
    ragged = tf.data.Dataset.from_tensor_slices(data).batch(6)
    graph = graph_ir.from_tensorflow(model.train_function, ragged)
    assert [n.output_descs[0].shape for n in graph.nodes.values() if n.type == "Data"] == [(-1, 12), (-1,)]


def _lookup_model() -> tuple[keras.layers.StringLookup, keras.Model]:
    """keras.io's wide-and-deep idiom in small: a StringLookup on a string feature, an Embedding and a Dense."""
    lookup = keras.layers.StringLookup(vocabulary=["a", "b", "c"])
    tokens = keras.Input((2,), dtype="int64")
    body = keras.Model(tokens, keras.layers.Dense(1)(keras.layers.Flatten()(keras.layers.Embedding(5, 4)(tokens))))
    return lookup, body


def test_a_string_lookup_in_the_step_is_listed_with_the_way_out_and_the_way_out_lowers(tmp_path):
    """A step taking strings through StringLookup: missing_ops lists the lookup table op and the string argument,
    each with the way out (the lookup into tf.data), without raising; from_tensorflow refuses it naming the argument.
    The step written that way (the lookup's int64 output as its input, as Ascend runs string work in the input
    pipeline) lowers and runs K steps as TF does, on the lookup's output for the same strings."""
    keras.utils.set_random_seed(3)
    lookup, body = _lookup_model()
    optimizer = FusedEmaAdam(0.01)

    @tf.function
    def with_strings(words, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((body(lookup(words), training=True) - y) ** 2)
        optimizer.apply_gradients(zip(tape.gradient(loss, body.trainable_variables), body.trainable_variables))
        return loss

    words = np.array([["a", "z"], ["c", "b"], ["", "a"], ["b", "b"]])
    y = np.random.default_rng(3).standard_normal((4, 1)).astype(np.float32)
    with_strings(words, y)
    specs = [tf.TensorSpec((4, 2), tf.string), tf.TensorSpec((4, 1), tf.float32)]
    missing = graph_ir.missing_ops(with_strings, *specs)
    assert set(missing) == {"LookupTableFindV2", "Placeholder"} and missing["Placeholder"] == ["words"], missing
    assert "move the lookup into tf.data" in missing.reasons["LookupTableFindV2"]
    assert "argument 'words' is a string tensor" in missing.reasons["Placeholder"]
    with pytest.raises(graph_ir.LoweringError, match=r"argument 'words' is a string tensor.*into tf.data"):
        graph_ir.from_tensorflow(with_strings, *specs)

    step = train_steps.train_step(body, keras.losses.MeanSquaredError(), optimizer)
    rng = np.random.default_rng(4)
    vocabulary = np.array(["a", "b", "c", "z", ""])
    batch = lambda k: (lookup(vocabulary[rng.integers(0, 5, (4, 2))]).numpy(), y)  # the lookup as tf.data maps it
    index_specs = [tf.TensorSpec((4, 2), tf.int64), tf.TensorSpec((4, 1), tf.float32)]
    _, differences, loss = train_steps.lower_and_compare(step, index_specs, batch,
                                                         [*body.variables, *optimizer.variables], str(tmp_path))
    assert max(differences.values()) <= FLOAT32_TOLERANCE and loss <= FLOAT32_TOLERANCE, differences
