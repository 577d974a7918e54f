"""Packaging: the wheel's metadata pins the TensorFlow it was built for, and `python -m tf_plugin` prints what a bug
report needs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import tensorflow as tf

from tests.helpers import ROOT


def test_metadata_forces_no_tensorflow_distribution(tmp_path):
    """As TF add-ons do it: no TensorFlow in install_requires; extras pick one, pinned to the built minor version."""
    subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path)], cwd=ROOT, check=True,
                   capture_output=True)
    (info,) = [d for d in os.listdir(tmp_path) if d.endswith(".egg-info")]
    with open(tmp_path / info / "requires.txt") as f:
        sections = f.read().split("\n[")
    assert not any("tensorflow" in line for line in sections[0].splitlines()), sections[0]
    major, minor = (int(x) for x in tf.__version__.split(".")[:2])
    extras = {s.split("]")[0]: s.split("]\n", 1)[1].split() for s in sections[1:]}
    pin = f"<{major}.{minor + 1},>={major}.{minor}"
    assert extras["cpu"] == [f"tensorflow-cpu{pin}"]
    assert extras["gpu"] == [f"tensorflow[and-cuda]{pin}"]
    assert extras["tensorflow"] == [f"tensorflow{pin}"]


def test_missing_tensorflow_is_one_clear_sentence(tmp_path):
    fake = tmp_path / "tensorflow"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('No module named tensorflow')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    result = subprocess.run([sys.executable, "-c", "import tf_plugin"], cwd=tmp_path, capture_output=True, text=True,
                            env=env, check=False, timeout=120)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: tf_plugin needs TensorFlow 2.") and "pip install 'tf_plugin[cpu]'" in last


def test_python_syntax_and_imports_work_on_the_declared_minimum(tmp_path):
    """vermin reads the sources (with `from __future__ import annotations`): nothing needs more than Python 3.10,
    the python_requires of setup.py (TensorFlow itself needs 3.10)."""
    with open(os.path.join(ROOT, "setup.py")) as f:
        assert 'python_requires=">=3.10"' in f.read()
    result = subprocess.run([os.path.join(os.path.dirname(sys.executable), "vermin"), "-t=3.10-", "--violations", "--no-tips",
                             "--eval-annotations", "op_spec", "graph_ir", "tf_plugin"], cwd=ROOT, capture_output=True,
                            text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]


def test_a_non_tensorflow_keras_backend_is_one_clear_sentence(monkeypatch):
    import keras

    from tf_plugin.optimizers import FusedEmaAdam, PowerSign

    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    for cls in (PowerSign, FusedEmaAdam):
        with pytest.raises(ValueError, match=f"^tf_plugin's {cls.__name__} runs TensorFlow ops, but Keras uses the "
                                             "'jax' backend; set KERAS_BACKEND=tensorflow before importing Keras.$"):
            cls()


def test_ops_still_import_when_keras_cannot():
    """KERAS_BACKEND=numpy without its own packages: Keras fails to import, the ops still load."""
    code = ("import tf_plugin, numpy as np, tensorflow as tf\n"
            "v, m = tf.Variable(np.ones(3, np.float32)), tf.Variable(np.zeros(3, np.float32))\n"
            "tf_plugin.raw_ops.ResourceApplyPowerSign(var=v, m=m, lr=0.1, logbase=0.0, sign_decay=1.0, beta=0.9,"
            " grad=np.ones(3, np.float32))\n"
            "assert np.allclose(v.numpy(), 0.9)\n")
    env = {**os.environ, "KERAS_BACKEND": "numpy", "TF_CPP_MIN_LOG_LEVEL": "2"}
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, timeout=120, capture_output=True)


def test_info_lists_every_op_and_warns_only_on_a_mismatch(capsys, monkeypatch):
    import tf_plugin
    from tf_plugin import __main__ as info

    info.main()
    out = capsys.readouterr().out
    assert "WARNING" not in out and "TfPluginResourceApplyMultiFusedEmaAdam" in out
    monkeypatch.delattr(tf_plugin.op_library, "TfPluginResourceApplyMultiPowerSign", raising=False)
    names = [n for n in dir(tf_plugin.op_library) if n.startswith("TfPlugin") and "MultiPowerSign" not in n]
    monkeypatch.setattr(tf_plugin, "op_library", type("Library", (), dict.fromkeys(names)))
    info.main()
    assert "WARNING: the op library does not match op_spec: missing TfPluginResourceApplyMultiPowerSign" in \
        capsys.readouterr().out
