"""The README's main command runs the demo: a short version trains every optimizer, and ends on the Ascend path
(each of our optimizers' whole training step lowered to one .air file and run in graph_ir.Session beside
TensorFlow on the same batches)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import ROOT


def test_demo_trains_and_runs_the_lowered_steps(tmp_path):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "MPLBACKEND": "Agg"}
    result = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "demo.py"), "--epochs", "1",
                             "--plot", str(tmp_path / "curves.png"), "--ge-dir", str(tmp_path / "ge")],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("The whole training step on the Ascend path"))
    rows = [line for line in lines[start + 3:] if line.startswith("tf_plugin")]
    assert len(rows) == 3, lines[start:]
    for row in rows:  # weights, slots and counters; the loss: within the float32 whole-step tolerance
        assert float(row.split()[-2]) <= 1e-5 and float(row.split()[-1]) <= 1e-5, row
    assert sorted(os.listdir(tmp_path / "ge")) == ["tf_plugin_FusedEmaAdam.air", "tf_plugin_PowerSign.air",
                                                   "tf_plugin_PowerSigncosine.air"]
    assert (tmp_path / "curves.png").stat().st_size > 0
