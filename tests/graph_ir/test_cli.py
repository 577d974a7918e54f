"""`python -m graph_ir` run as a user runs it: a subprocess on real files, exit codes checked. convert lowers a
SavedModel given its input shape, show and run read the .air back (run's outputs equal TF's serving signature),
missing lists what a SavedModel lacks, ops prints the table; a missing file, a bad shape string, an unknown
signature and wrong inputs each give exit status 2 and one line on stderr naming what is wrong. The verbs that lower
import TensorFlow in their subprocess (10 s or more each here): those cases are slow."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.helpers import ROOT
from tests.helpers.cli import TIMEOUT, cli_reporting_tf, one_error_line, run_cli, small_air


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> tuple[str, str]:
    """A small CNN exported for serving (batch dim None) and its input's name."""
    keras.utils.set_random_seed(41)
    model = keras.Sequential([keras.Input((8, 8, 2)), keras.layers.Conv2D(3, 3, activation="relu"),
                              keras.layers.Flatten(), keras.layers.Dense(4)])
    path = str(tmp_path_factory.mktemp("cli") / "cnn")
    model.export(path, verbose=False)
    (name,) = tf.saved_model.load(path).signatures["serving_default"].structured_input_signature[1]
    return path, name


@pytest.mark.slow
def test_convert_show_and_run(saved, tmp_path):
    path, name = saved
    air = str(tmp_path / "cnn.air")
    done = run_cli("convert", path, air, "--input_shape", f"{name}:3,8,8,2")
    assert "wrote" in done.stdout and os.path.isfile(air)
    shown = run_cli("show", air, "--nodes").stdout
    assert f"input 0 {name}: float32[3, 8, 8, 2]" in shown and "Conv2D" in shown and "variable" in shown
    x = np.random.default_rng(42).standard_normal((3, 8, 8, 2)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = str(tmp_path / "out.npz")
    printed = run_cli("run", air, "--inputs", str(tmp_path / "x.npy"), "--out", out, "--print").stdout
    assert "output_0: float32[3, 4]" in printed
    (want,) = tf.saved_model.load(path).signatures["serving_default"](**{name: tf.constant(x)}).values()
    with np.load(out) as got:
        np.testing.assert_allclose(got["output_0"], want.numpy(), rtol=1e-5, atol=1e-6)
    np.savez(tmp_path / "named.npz", **{name: x})
    run_cli("run", air, "--inputs", str(tmp_path / "named.npz"))


@pytest.mark.slow
def test_missing_and_ops(saved, tmp_path):
    path, name = saved
    assert "every op has a lowering" in run_cli("missing", path, "--input_shape", f"{name}:1,8,8,2").stdout

    class Special(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec((4,), tf.float32)])
        def f(self, x):
            return tf.math.igamma(x, x + 1.0)

    special = str(tmp_path / "special")
    tf.saved_model.save(Special(), special)
    done = run_cli("missing", special, "--signature", "f", ok=1)
    assert done.stdout.startswith("Igamma (1):")
    assert "Conv2D" in run_cli("ops").stdout


_SLOW = pytest.mark.slow


@pytest.mark.parametrize("args, pattern", [
    pytest.param(("convert", "{dir}/nowhere", "{dir}/x.air"), r"convert: error: SavedModel '.*nowhere': no such "
                 "directory", marks=_SLOW),
    pytest.param(("convert", "{saved}", "{dir}/x.air", "--input_shape", "{name}:3,x,8,2"), r"is not name:d0,d1",
                 marks=_SLOW),
    pytest.param(("convert", "{saved}", "{dir}/x.air", "--signature", "nope"), r"has no signature or function 'nope'",
                 marks=_SLOW),
    pytest.param(("convert", "{saved}", "{dir}/x.air", "--input_shape", "{name}:-2,8,8,2"),
                 r"expected dims >= 0, or -1 for a dim known only at run time", marks=_SLOW),
    (("convert", "{saved}", "{dir}/x.onnx", "--input_shape", "{name}:1,8,8,2"), r"must end in .air or .pbtxt"),
    (("show", "{dir}/none.air"), r"show: error: graph '.*none.air': no such file"),
    (("run", "{dir}/none.air"), r"run: error: graph '.*none.air': no such file"),
])
def test_bad_input_is_one_line_and_exit_status_2(saved, tmp_path, args, pattern):
    path, name = saved
    one_error_line(run_cli(*[a.format(dir=tmp_path, saved=path, name=name) for a in args], ok=None), pattern)


@pytest.mark.slow
def test_run_refuses_inputs_that_do_not_fit(saved, tmp_path):
    path, name = saved
    air = str(tmp_path / "cnn.air")
    run_cli("convert", path, air, "--input_shape", f"{name}:2,8,8,2")
    np.save(tmp_path / "wrong.npy", np.zeros((2, 8, 8, 3), np.float32))
    one_error_line(run_cli("run", air, "--inputs", str(tmp_path / "wrong.npy"), ok=None), r"run: error: .*8, 8, 3")
    np.savez(tmp_path / "other.npz", y=np.zeros(3))
    one_error_line(run_cli("run", air, "--inputs", str(tmp_path / "other.npz"), ok=None), r"no array '.*'; the graph's")
    (tmp_path / "garbage.air").write_bytes(b"\x00not a model")
    one_error_line(run_cli("show", str(tmp_path / "garbage.air"), ok=None), r"show: error: ")


def test_draw_writes_the_ge_dump(tmp_path):
    """draw reads a .air and writes GE's ONNX-format dump (no TensorFlow in that subprocess: it runs fast)."""
    import onnx

    import graph_ir

    graph = graph_ir.Graph("g")
    with graph:
        x = graph_ir.Data(0, "float32", (2, 3), name="x")
        graph.set_outputs([graph_ir.ops.Relu(x)])
    graph.save(str(tmp_path / "g.air"))
    done = run_cli("draw", str(tmp_path / "g.air"), str(tmp_path / "g.onnx"))
    assert "wrote" in done.stdout
    assert [n.op_type for n in onnx.load(str(tmp_path / "g.onnx")).graph.node] == ["ge:Data", "ge:Relu", "ge:NetOutput"]
    one_error_line(run_cli("draw", str(tmp_path / "g.air"), str(tmp_path / "g.png"), ok=None), r"draw: error: .*\.onnx")


@pytest.mark.slow
def test_convert_a_frozen_graph_with_out_nodes(tmp_path):
    from tests.graph_ir.test_saved_models import _frozen_cnn

    path, model = _frozen_cnn(tmp_path)
    air = str(tmp_path / "frozen.air")
    run_cli("convert", path, air, "--out_nodes", "logits:0", "--input_shape", "x:2,6,6,2")
    x = np.random.default_rng(44).standard_normal((2, 6, 6, 2)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    run_cli("run", air, "--inputs", str(tmp_path / "x.npy"), "--out", str(tmp_path / "out.npz"))
    with np.load(tmp_path / "out.npz") as got:
        np.testing.assert_allclose(got["output_0"], model(x).numpy(), rtol=1e-5, atol=1e-6)
    one_error_line(run_cli("convert", path, air, ok=None), r"is a file: a frozen GraphDef needs --out_nodes")


@pytest.mark.slow
def test_convert_a_keras_application_and_a_saved_training_step(tmp_path):
    """ATC's two everyday inputs: a keras.applications model exported for serving, and a training step saved with its
    variables; each converted with --input_shape, then run by `run` equal to TF."""
    from tests.graph_ir.test_saved_models import _Trainer

    keras.utils.set_random_seed(45)
    serving = str(tmp_path / "mobilenet")
    model = keras.applications.MobileNetV2(weights=None, input_shape=(32, 32, 3), classes=5)
    model.export(serving, verbose=False)
    (name,) = tf.saved_model.load(serving).signatures["serving_default"].structured_input_signature[1]
    run_cli("convert", serving, str(tmp_path / "mobilenet.air"), "--input_shape", f"{name}:2,32,32,3")
    x = np.random.default_rng(46).uniform(-1, 1, (2, 32, 32, 3)).astype(np.float32)
    np.savez(tmp_path / "x.npz", x)
    run_cli("run", str(tmp_path / "mobilenet.air"), "--inputs", str(tmp_path / "x.npz"), "--out", str(tmp_path / "y.npz"))
    with np.load(tmp_path / "y.npz") as got:
        np.testing.assert_allclose(got["output_0"], model(x, training=False).numpy(), rtol=1e-4, atol=1e-5)

    trainer = str(tmp_path / "trainer")
    tf.saved_model.save(_Trainer(), trainer)
    run_cli("convert", trainer, str(tmp_path / "train.air"), "--signature", "train_step", "--input_shape", "x:4,6;y:4")
    rng = np.random.default_rng(47)
    batch = [rng.standard_normal((4, 6)).astype(np.float32), rng.integers(0, 3, 4).astype(np.int32)]
    np.savez(tmp_path / "batch.npz", *batch)
    run_cli("run", str(tmp_path / "train.air"), "--inputs", str(tmp_path / "batch.npz"), "--steps", "3", "--out",
         str(tmp_path / "loss.npz"))
    loaded = tf.saved_model.load(trainer)
    for _ in range(3):
        want = loaded.train_step(*batch).numpy()
    with np.load(tmp_path / "loss.npz") as got:  # the third step's loss: every update before it was TF's
        np.testing.assert_allclose(got["output_0"], want, rtol=1e-5)


def test_ops_prints_the_table_without_importing_tensorflow():
    done, imported = cli_reporting_tf("ops")
    assert done.returncode == 0 and not imported
    assert re.search(r"^Conv2D +Conv2D +conv$", done.stdout, flags=re.MULTILINE), done.stdout[:2000]


def test_the_ops_table_copy_is_the_lowerings():
    """`ops` prints graph_ir/cli/_op_rows.py; after adding a lowering: python -m graph_ir ops --regenerate."""
    from graph_ir.cli import ops_table
    from graph_ir.cli._op_rows import ROWS
    from graph_ir.lowering.report import format_op_table, op_table

    assert list(ROWS) == op_table(), "graph_ir/cli/_op_rows.py is stale: run python -m graph_ir ops --regenerate"
    assert ops_table.format_rows(ROWS) == format_op_table()


def test_the_cli_shape_check_is_the_lowerings():
    """convert checks --input_shape before importing TensorFlow with the lowering's own parser (graph_ir/ir), which
    needs no TensorFlow: the same refusals, in the same words."""
    from graph_ir.cli import convert
    from graph_ir.lowering import saved_model

    assert convert.parse_input_shapes is saved_model.parse_input_shapes
    code = "import sys, graph_ir.ir.input_shapes; print('tensorflow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout.split() == ["False"], done.stdout


@pytest.mark.parametrize("args, pattern", [
    (("convert", "{dir}/nowhere", "{dir}/x.air"), r"convert: error: SavedModel '.*nowhere': no such directory"),
    (("convert", "{dir}/nowhere.pb", "{dir}/x.air"), r"SavedModel '.*nowhere\.pb': no such directory or file"),
    (("convert", "{dir}", "{dir}/x.air"), r"SavedModel '.*': the directory has no saved_model\.pb"),
    (("convert", "{saved}", "{dir}/x.air", "--input_shape", "{name}:3,x,8,2"), r"is not name:d0,d1"),
    (("convert", "{saved}", "{dir}/x.air", "--input_shape", "{name}:-2,8,8,2"),
     r"expected dims >= 0, or -1 for a dim known only at run time"),
    (("convert", "{saved}", "{dir}/no/x.air"), r"output '.*no/x\.air': no such directory"),
    (("convert", "{saved}/saved_model.pb", "{dir}/x.air"), r"is a file: a frozen GraphDef needs --out_nodes"),
    (("missing", "{dir}/nowhere"), r"missing: error: SavedModel '.*nowhere': no such directory"),
    (("missing", "{saved}", "--input_shape", "{name}:3;{name}:4"), r"given twice"),
])
def test_a_bad_command_line_is_refused_before_tensorflow_is_imported(saved, tmp_path, args, pattern):
    path, name = saved
    done, imported = cli_reporting_tf(*[a.format(dir=tmp_path, saved=path, name=name) for a in args])
    one_error_line(done, pattern)
    assert not imported


@pytest.mark.slow
def test_convert_prints_no_tensorflow_log(saved, tmp_path):
    """Without TF_CPP_MIN_LOG_LEVEL set, TF's start-up lines (absl's pre-init warning, oneDNN, cpu_feature_guard)
    stay out of a plain convert's stderr."""
    path, name = saved
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-m", "graph_ir", "convert", path, str(tmp_path / "x.air"), "--input_shape",
                           f"{name}:1,8,8,2"], capture_output=True, text=True, env={**env, "PYTHONPATH": ROOT},
                          timeout=TIMEOUT, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    for noise in ("oneDNN custom operations", "cpu_feature_guard", "absl::InitializeLog", "I0000 "):
        assert noise not in done.stderr, done.stderr[-2000:]


@pytest.mark.slow
def test_show_lists_a_saved_models_signatures_with_input_names(saved):
    """The names --input_shape wants (Keras's keras_tensor_N), without saved_model_cli."""
    path, name = saved
    shown = run_cli("show", path).stdout
    assert "signature 'serving_default':" in shown
    assert f"    input {name}: float32[-1, 8, 8, 2]" in shown and "    output output_0: float32[-1, 4]" in shown
    assert f'--signature serving_default --input_shape "{name}:-1,8,8,2"' in shown


def test_show_refuses_a_directory_that_is_no_saved_model(tmp_path):
    one_error_line(run_cli("show", str(tmp_path), ok=None), r"show: error: '.*': a directory without saved_model\.pb")


def test_show_puts_the_summary_before_the_variables(tmp_path):
    import graph_ir

    graph = graph_ir.Graph("g")
    with graph:
        x = graph_ir.Data(0, "float32", (2, 3), name="x")
        w = [graph_ir.Variable(f"w{k}", np.ones((2, 3), np.float32)) for k in range(3)]
        graph.set_outputs([graph_ir.ops.Add(x, w[0])])
    graph.save(str(tmp_path / "v.air"))
    lines = run_cli("show", str(tmp_path / "v.air")).stdout.splitlines()
    assert re.match(r"graph 'g': \d+ nodes, 3 variables, 0 subgraphs$", lines[0]), lines
    assert lines[1].startswith("  op types: ") and "Variable 3" in lines[1], lines
    assert [k for k, line in enumerate(lines) if line.startswith("  variable ")] == [4, 5, 6], lines


def test_draw_without_an_output_writes_the_onnx_beside_the_graph(tmp_path):
    import onnx

    air = small_air(tmp_path)
    done = run_cli("draw", air)
    assert f"wrote {tmp_path / 'g.onnx'}" in done.stdout
    assert onnx.load(str(tmp_path / "g.onnx")).graph.node[0].op_type == "ge:Data"


@pytest.mark.parametrize("args, pattern", [
    (("convert", "--model={dir}/m.pb", "--framework=1", "--output={dir}/m"), r"--framework=1: only 3 \(TensorFlow\)"),
    (("convert", "--model={dir}/m.pb", "--framework=3", "--output={dir}/m", "--soc_version=Ascend910B"),
     r"SavedModel '.*m\.pb': no such directory or file"),
    (("convert", "--framework=3", "--output={dir}/m"), r"give SAVED_MODEL \(or --model=...\)"),
])
def test_convert_takes_atcs_flags(tmp_path, args, pattern):
    done, imported = cli_reporting_tf(*[a.format(dir=tmp_path) for a in args])
    one_error_line(done, pattern)
    assert not imported
    if any(a.startswith("--soc_version") for a in args):
        assert "note: --soc_version only choose the NPU's code generation: no meaning off the NPU" in done.stderr


@pytest.mark.slow
def test_an_atc_command_line_converts_as_written(tmp_path):
    from tests.graph_ir.test_saved_models import _frozen_cnn

    path, _ = _frozen_cnn(tmp_path)
    done = run_cli("convert", f"--model={path}", "--framework=3", f"--output={tmp_path / 'm'}", "--input_shape=x:2,6,6,2",
                "--out_nodes=logits:0", "--soc_version=Ascend910B", "--precision_mode=allow_fp32_to_fp16")
    assert os.path.isfile(tmp_path / "m.air")
    assert "note: --soc_version, --precision_mode only choose the NPU's code generation" in done.stderr
