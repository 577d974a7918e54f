"""Template graphs (GE's -1 for dims known only at run time, graph_ir/dynamic) in files: saved as .air and .pbtxt
they keep the -1s in every Data desc and parse as the ge.proto ModelDef the project vendors from CANN; loaded back
they run at two sizes exactly as the lowered graph does. Hostile template files are refused by graph_ir.load with a
GraphError naming the node and the field: a dim of -3, an unknown rank (-2), a Const desc with -1, a Reshape whose
shape Const cannot fit the unknown dim, a MaxPool ksize of -1. The CLI converts a SavedModel with
--input_shape "x:-1,12" (ATC's way) to a template and runs it on .npy inputs of two batch sizes."""

from __future__ import annotations

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

import graph_ir
from graph_ir import proto
from tests.helpers import ROOT
from tests.helpers.dynamic_steps import data_shapes

TIMEOUT = 300


def _reshape_template() -> graph_ir.Graph:
    """x [-1, 6, 2] -> Reshape to [-1, 12] (a shape Const) -> MatMul by a Variable -> Relu."""
    w = tf.Variable(np.random.default_rng(81).standard_normal((12, 4)).astype(np.float32), name="files/w")

    @tf.function
    def forward(x):
        return tf.nn.relu(tf.reshape(x, [-1, 12]) @ w)

    return graph_ir.from_tensorflow(forward, tf.TensorSpec((None, 6, 2), tf.float32))


def _pool_template() -> graph_ir.Graph:
    """x [-1, 6, 6, 2] -> MaxPool 2x2 -> a sum scaled by a Variable."""
    scale = tf.Variable(np.float32(1.5), name="files/scale")

    @tf.function
    def forward(x):
        return tf.reduce_sum(tf.nn.max_pool2d(x, 2, 2, "VALID"), axis=[1, 2]) * scale

    return graph_ir.from_tensorflow(forward, tf.TensorSpec((None, 6, 6, 2), tf.float32))


def _data_descs(model) -> list[list[int]]:
    return [list(op.output_desc[0].shape.dim) for op in model.graph[0].op if op.type == "Data"]


def _run(graph: graph_ir.Graph, inputs: list[np.ndarray]) -> list[np.ndarray]:
    session = graph_ir.Session()
    session.add_graph(0, graph)
    return session.run_graph(0, inputs)


@pytest.mark.parametrize("ext", ["air", "pbtxt"])
def test_a_template_file_keeps_its_unknown_dims_and_runs(ext, tmp_path):
    """The file is a ge.proto ModelDef whose Data desc says [-1, 6, 2]; graph_ir.load reads the same template
    back, and it runs at batches 5 and 1 to the lowered graph's outputs, bitwise."""
    graph = _reshape_template()
    path = str(tmp_path / f"t.{ext}")
    graph.save(path)
    with open(path, "rb") as f:
        raw = f.read()
    model = proto.ModelDef.FromString(raw) if ext == "air" else text_format.Parse(raw.decode(), proto.ModelDef())
    assert _data_descs(model) == [[-1, 6, 2]]
    loaded = graph_ir.load(path)
    assert data_shapes(loaded) == data_shapes(graph) == [(-1, 6, 2)]
    rng = np.random.default_rng(82)
    for n in (5, 1):
        x = rng.standard_normal((n, 6, 2)).astype(np.float32)
        x[0, 0] = 0.0
        (got,), (want,) = _run(loaded, [x]), _run(graph, [x])
        assert got.shape == (n, 4)
        np.testing.assert_array_equal(got, want)


def _op(model, name: str):
    return next(op for op in model.graph[0].op if op.name == name)


def _op_of_type(model, op_type: str):
    return next(op for op in model.graph[0].op if op.type == op_type)


def _load_error(model, match: str) -> None:
    with pytest.raises(graph_ir.GraphError, match=match):
        graph_ir.loads(model.SerializeToString())


@pytest.mark.parametrize(("dim", "match"), [
    (-3, r"node 'x': output_desc\[0\] has shape \[-3, 6, 2\]; a dim is >= 0, or -1"),
    (-2, r"node 'x': output_desc\[0\] has shape \[-2, 6, 2\]: -2 \(an unknown rank\) is not supported"),
], ids=["minus_3", "minus_2"])
def test_a_data_dim_below_minus_one_is_refused(dim, match):
    model = _reshape_template().to_model_def()
    _op(model, "x").output_desc[0].shape.dim[0] = dim
    _load_error(model, match)


def test_a_const_desc_with_an_unknown_dim_is_refused():
    model = _reshape_template().to_model_def()
    const = _op_of_type(model, "Const")
    const.output_desc[0].shape.dim[0] = -1
    _load_error(model, rf"Const '{const.name}': output_desc\[0\] has shape \[-1\], but a Const's shape is its value's")


def test_a_reshape_that_cannot_fit_the_unknown_dim_is_refused():
    """The shape Const says [-1, 7]: x [-1, 6, 2] has 12 elements a row, so at the probe sizes the rows do not
    divide by 7 and the file is refused naming the Reshape (the template is checked at both probes on load)."""
    model = _reshape_template().to_model_def()
    reshape = _op_of_type(model, "Reshape")
    const = _op(model, reshape.input[1].split(":")[0])
    const.attr["value"].t.data = np.array([-1, 7], np.int32).tobytes()
    _load_error(model, rf"Reshape '{reshape.name}'")


def test_a_pool_template_loads_and_a_ksize_of_minus_one_is_refused(tmp_path):
    """The MaxPool template loads back and runs as lowered; with ksize [1, -1, 2, 1] (a window that would depend
    on the unknown dim) the file is refused naming the node and the attribute."""
    graph = _pool_template()
    loaded = graph_ir.loads(graph.to_model_def().SerializeToString())
    x = np.random.default_rng(83).standard_normal((3, 6, 6, 2)).astype(np.float32)
    np.testing.assert_array_equal(_run(loaded, [x])[0], _run(graph, [x])[0])
    model = graph.to_model_def()
    pool = _op_of_type(model, "MaxPool")
    pool.attr["ksize"].list.i[1] = -1
    _load_error(model, rf"MaxPool '{pool.name}'.*ksize")


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-m", "graph_ir", *args], capture_output=True, text=True, env=env,
                          timeout=TIMEOUT, cwd=ROOT, check=False)
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return done


@pytest.mark.slow
def test_cli_converts_with_an_unknown_batch_and_runs_two_batch_sizes(tmp_path):
    """convert --input_shape "x:-1,12" keeps -1 in the .air's Data desc; run gives TF's serving outputs at
    batches 5 and 2 from the same file."""
    keras.utils.set_random_seed(84)
    model = keras.Sequential([keras.Input((12,)), keras.layers.Dense(6, activation="tanh"), keras.layers.Dense(3)])
    saved = str(tmp_path / "mlp")
    model.export(saved, verbose=False)
    serving = tf.saved_model.load(saved).signatures["serving_default"]
    (name,) = serving.structured_input_signature[1]
    air = str(tmp_path / "mlp.air")
    _cli("convert", saved, air, "--input_shape", f"{name}:-1,12")
    with open(air, "rb") as f:
        assert _data_descs(proto.ModelDef.FromString(f.read())) == [[-1, 12]]
    rng = np.random.default_rng(85)
    for n in (5, 2):
        x = rng.standard_normal((n, 12)).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        out = str(tmp_path / f"out{n}.npz")
        _cli("run", air, "--inputs", str(tmp_path / "x.npy"), "--out", out)
        (want,) = serving(**{name: tf.constant(x)}).values()
        with np.load(out) as got:
            np.testing.assert_allclose(got["output_0"], want.numpy(), rtol=1e-5, atol=1e-6)
