"""SavedModels lowered as Ascend users convert them with ATC: a keras.applications model's serving signature (its
batch dim None) given its input shape by name, and a training step saved with its variables and FusedEmaAdam, each
run in the Session beside TF; a ConcreteFunction with a None batch through from_tensorflow(input_shapes=...); and
the refusals, each naming the directory, signature, argument or dim."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import graph_ir
import tf_plugin  # noqa: F401  (the op library: a SavedModel holding FusedEmaAdam loads only with it)
from graph_ir.lowering.saved_model import parse_input_shapes
from tests.helpers.train_steps import scaled_difference
from tf_plugin.optimizers import FusedEmaAdam


def _session(graph: graph_ir.Graph) -> graph_ir.Session:
    session = graph_ir.Session()
    session.add_graph(0, graph)
    return session


@pytest.fixture(scope="module")
def serving_model(tmp_path_factory) -> str:
    keras.utils.set_random_seed(31)
    path = str(tmp_path_factory.mktemp("saved") / "mobilenet")
    keras.applications.MobileNetV2(weights=None, input_shape=(32, 32, 3), classes=5).export(path, verbose=False)
    return path


def test_serving_signature_with_an_input_shape(serving_model, tmp_path):
    signature = tf.saved_model.load(serving_model).signatures["serving_default"]
    (name,) = signature.structured_input_signature[1]
    graph = graph_ir.from_saved_model(serving_model, input_shapes=f"{name}:3,32,32,3")
    assert graph.nodes_of_type("Data")[0].output_descs[0].shape == (3, 32, 32, 3)
    graph.save(str(tmp_path / "mobilenet.air"))
    session = _session(graph_ir.load(str(tmp_path / "mobilenet.air")))
    x = np.random.default_rng(32).uniform(-1, 1, (3, 32, 32, 3)).astype(np.float32)
    (got,) = session.run_graph(0, [x])
    (want,) = signature(**{name: tf.constant(x)}).values()
    assert scaled_difference(got, want.numpy()) <= 1e-5


class _Trainer(tf.Module):
    """A model, its optimizer and a training step with a None batch: what a training job saves."""

    def __init__(self):
        super().__init__()
        keras.utils.set_random_seed(33)
        self.model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="tanh"),
                                       keras.layers.Dense(3)])
        self.optimizer = FusedEmaAdam(1e-2)
        self.optimizer.build(self.model.trainable_variables)
        self.loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(input_signature=[tf.TensorSpec((None, 6), tf.float32), tf.TensorSpec((None,), tf.int32)])
    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            loss = self.loss(y, self.model(x, training=True))
        variables = self.model.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss


def test_training_step_saved_with_its_variables(tmp_path):
    path = str(tmp_path / "trainer")
    tf.saved_model.save(_Trainer(), path)
    graph = graph_ir.from_saved_model(path, "train_step", input_shapes={"x": (5, 6), "y": (5,)})
    session = _session(graph)
    loaded = tf.saved_model.load(path)  # TF's own run of the same SavedModel, from the same values
    rng = np.random.default_rng(34)
    for _ in range(3):
        x, y = rng.standard_normal((5, 6)).astype(np.float32), rng.integers(0, 3, 5).astype(np.int32)
        (ge_loss,) = session.run_graph(0, [x, y])
        assert abs(ge_loss - loaded.train_step(x, y).numpy()) <= 1e-5 * max(1.0, abs(ge_loss))
    # The model's weights and the step counter, matched by name (the optimizer's flat slots are split per weight in
    # the graph; the weights after 3 steps are only right if the slots were).
    by_name = {v.name.split(":")[0]: v for v in loaded.train_step.concrete_functions[0].variables}
    held = [n.name for n in graph.nodes_of_type("Variable") if n.name in by_name]
    assert sum(name.rsplit("/", 1)[-1] in ("kernel", "bias") for name in held) == 4, held  # 2 kernels, 2 biases
    for name, got in zip(held, session.get_variables(held)):
        assert scaled_difference(got, by_name[name].numpy()) <= 1e-5, name


def test_a_concrete_function_with_a_none_batch_takes_input_shapes():
    dense = keras.layers.Dense(4)
    fn = tf.function(lambda x: dense(x) * 2).get_concrete_function(tf.TensorSpec((None, 3), tf.float32, name="x"))
    rng = np.random.default_rng(35)
    graph = graph_ir.from_tensorflow(fn, input_shapes="x:7,3")
    assert graph.nodes["x"].output_descs[0].shape == (7, 3)
    x = rng.standard_normal((7, 3)).astype(np.float32)
    # Float32 products, to one ulp: oneMKL's and TF's oneDNN sum in one order on some CPUs (Intel Xeon), not on
    # others (AMD EPYC), and a batch TF sees unknown takes another oneDNN kernel.
    np.testing.assert_allclose(_session(graph).run_graph(0, [x])[0], fn(tf.constant(x)).numpy(), rtol=1e-6)
    # Left unknown (or given as -1, as ATC takes it), the batch is GE's -1 and every batch size runs.
    for given in ({"x": None}, {"x": "7,abc"}):  # the documented LoweringError, not a bare TypeError/ValueError
        with pytest.raises(graph_ir.LoweringError, match=r"input shape of 'x' is .*; expected dims >= 0"):
            graph_ir.from_tensorflow(fn, input_shapes=given)
    for given in (None, "x:-1,3", {"x": (-1, 3)}, {"x": "-1,3"}):
        graph = graph_ir.from_tensorflow(fn, input_shapes=given)
        assert graph.nodes["x"].output_descs[0].shape == (-1, 3)
        session = _session(graph)
        for rows in (5, 1, 0):
            x = rng.standard_normal((rows, 3)).astype(np.float32)
            np.testing.assert_allclose(session.run_graph(0, [x])[0], fn(tf.constant(x)).numpy(), rtol=1e-6)


@pytest.mark.parametrize("given, match", [
    ("x", r"input shape 'x' is not name:d0,d1"),
    ("x:8,-2", r"input shape of 'x' is '8,-2'; expected dims >= 0, or -1"),
    ("x:8,+1", r"input shape 'x:8,\+1' is not name:d0,d1"),
    ({"x": (8, 1.5)}, r"input shape of 'x' is \(8, 1.5\)"),
    ("x:8;x:9", r"input shape of 'x' is given twice"),
    (8, r"input_shapes must be a str"),
    ({"x": None}, r"input shape of 'x' is None; expected dims >= 0, or -1 .* a sequence of ints or a string"),
    ({"x": "abc"}, r"input shape of 'x' is 'abc'; expected dims >= 0, or -1"),
    ({"x": 5}, r"input shape of 'x' is 5; expected"),
    ({"x": (8, True)}, r"input shape of 'x' is \(8, True\)"),
])
def test_input_shape_strings_are_checked(given, match):
    with pytest.raises(graph_ir.LoweringError, match=match):
        parse_input_shapes(given)


def test_saved_model_refusals_name_what_is_wrong(serving_model, tmp_path):
    (name,) = tf.saved_model.load(serving_model).signatures["serving_default"].structured_input_signature[1]
    with pytest.raises(graph_ir.LoweringError, match=r"SavedModel '.*nowhere': no such directory"):
        graph_ir.from_saved_model(str(tmp_path / "nowhere"))
    with pytest.raises(graph_ir.LoweringError, match=r"has no signature or function 'predict'; it has \['serve") as e:
        graph_ir.from_saved_model(serving_model, "predict")
    listed = str(e.value).rpartition("it has ")[2]
    assert listed == "['serve', 'serving_default']", listed  # each once: 'serve' is a signature and a function
    with pytest.raises(graph_ir.LoweringError, match=r"input_shapes names \['image'\], which the function does not"):
        graph_ir.from_saved_model(serving_model, input_shapes="image:1,32,32,3")
    with pytest.raises(graph_ir.LoweringError, match=r"input shape \[1, 16, 16, 3\] does not fit"):
        graph_ir.from_saved_model(serving_model, input_shapes=f"{name}:1,16,16,3")
    (tmp_path / "broken").mkdir()
    with pytest.raises(graph_ir.LoweringError, match=r"SavedModel '.*broken' cannot be loaded"):
        graph_ir.from_saved_model(str(tmp_path / "broken"))


def _frozen_cnn(tmp_path) -> tuple[str, keras.Model]:
    """A small CNN's inference frozen as ATC takes TF models: variables folded into Consts, a None batch."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    keras.utils.set_random_seed(36)
    model = keras.Sequential([keras.Input((6, 6, 2)), keras.layers.Conv2D(3, 3, activation="relu"),
                              keras.layers.Flatten(), keras.layers.Dense(4)])
    fn = tf.function(lambda x: tf.identity(model(x), name="logits"))
    frozen = convert_variables_to_constants_v2(fn.get_concrete_function(tf.TensorSpec((None, 6, 6, 2), name="x")))
    path = str(tmp_path / "cnn.pb")
    tf.io.write_graph(frozen.graph.as_graph_def(), str(tmp_path), "cnn.pb", as_text=False)
    return path, model


def test_frozen_graph_with_out_nodes_and_an_input_shape(tmp_path):
    path, model = _frozen_cnn(tmp_path)
    graph = graph_ir.from_frozen_graph(path, ["logits:0"], input_shapes="x:5,6,6,2")
    assert not graph.nodes_of_type("Variable")  # frozen: the weights are Consts
    x = np.random.default_rng(37).standard_normal((5, 6, 6, 2)).astype(np.float32)
    (got,) = _session(graph).run_graph(0, [x])
    assert scaled_difference(got, model(x).numpy()) <= 1e-5
    graph = graph_ir.from_frozen_graph(path, ["logits:0"])  # the file's None batch: GE's -1, any batch runs
    assert graph.nodes["x"].output_descs[0].shape == (-1, 6, 6, 2)
    (got,) = _session(graph).run_graph(0, [x[:3]])
    assert scaled_difference(got, model(x[:3]).numpy()) <= 1e-5
    with pytest.raises(graph_ir.LoweringError, match=r"input_shapes names \['y'\], which are not Placeholders"):
        graph_ir.from_frozen_graph(path, ["logits:0"], input_shapes="y:5,6,6,2")
    with pytest.raises(graph_ir.LoweringError, match=r"Placeholder 'x': input shape \[5, 6, 6\] does not fit"):
        graph_ir.from_frozen_graph(path, ["logits:0"], input_shapes="x:5,6,6")
    (tmp_path / "junk.pb").write_bytes(b"\xff\xff\xff not protobuf")
    with pytest.raises(graph_ir.LoweringError, match=r"frozen graph '.*junk.pb' is not a binary GraphDef"):
        graph_ir.from_frozen_graph(str(tmp_path / "junk.pb"), ["logits:0"])
    with pytest.raises(graph_ir.LoweringError, match=r"outputs must be a list"):
        graph_ir.from_frozen_graph(path, "logits:0")
