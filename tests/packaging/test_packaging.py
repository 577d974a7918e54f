"""Packaging: the wheel's metadata pins the TensorFlow it was built for, and `python -m tf_plugin` prints what a bug
report needs."""

from __future__ import annotations

import os
import subprocess
import sys

import tensorflow as tf

import tf_plugin
from tests.helpers import ROOT


def test_metadata_pins_the_tensorflow_it_is_built_against(tmp_path):
    subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path)], cwd=ROOT, check=True,
                   capture_output=True)
    (info,) = [d for d in os.listdir(tmp_path) if d.endswith(".egg-info")]
    with open(tmp_path / info / "requires.txt") as f:
        requires = f.read().splitlines()
    assert f"tensorflow-cpu=={tf.__version__}" in requires or f"tensorflow=={tf.__version__}" in requires, requires


def test_python_m_tf_plugin_prints_a_bug_report_header():
    result = subprocess.run([sys.executable, "-m", "tf_plugin"], cwd=ROOT, capture_output=True, text=True,
                            check=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    out = result.stdout
    assert f"tf_plugin {tf_plugin.__version__}" in out
    assert f"built for {tf.__version__}, running {tf.__version__}" in out
    assert tf_plugin.library_path() in out
    assert f"SIMD path: {tf_plugin.isa()}" in out
    for op in ("TfPluginApplyPowerSign", "TfPluginResourceApplyPowerSign", "TfPluginApplyFusedEmaAdam",
               "TfPluginResourceApplyFusedEmaAdam"):
        assert op in out
    assert "WARNING" not in out
