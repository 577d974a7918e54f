"""The command line as a user runs it (`python -m graph_ir` in a subprocess, on real files): tests/graph_ir/test_cli*."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.helpers import ROOT

TIMEOUT = 300  # each verb imports TensorFlow; a hang must not stall the suite


def run_cli(*args: str, ok: int | None = 0) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-m", "graph_ir", *args], capture_output=True, text=True, env=env,
                          timeout=TIMEOUT, cwd=ROOT, check=False)
    if ok is not None:
        assert done.returncode == ok, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return done


def one_error_line(done: subprocess.CompletedProcess, pattern: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.startswith("python -m graph_ir")]
    assert len(lines) == 1 and re.search(pattern, lines[0]), done.stderr[-2000:]


_REPORTS_TF = ("import atexit, sys\n"
               "atexit.register(lambda: print('tensorflow imported:', 'tensorflow' in sys.modules, file=sys.stderr))\n"
               "from graph_ir.cli import main\n"
               "sys.exit(main(sys.argv[1:]))\n")


def cli_reporting_tf(*args: str) -> tuple[subprocess.CompletedProcess, bool]:
    """The command line run in a subprocess that says at exit whether TensorFlow got imported."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-c", _REPORTS_TF, *args], capture_output=True, text=True, env=env,
                          timeout=TIMEOUT, cwd=ROOT, check=False)
    assert "tensorflow imported:" in done.stderr, done.stderr[-2000:]
    return done, "tensorflow imported: True" in done.stderr


def small_air(tmp_path) -> str:
    """A graph of one float32[2, 3] input x (no TensorFlow: the subprocesses run fast)."""
    import graph_ir

    graph = graph_ir.Graph("g")
    with graph:
        x = graph_ir.Data(0, "float32", (2, 3), name="x")
        graph.set_outputs([graph_ir.ops.Relu(x)])
    graph.save(str(tmp_path / "g.air"))
    return str(tmp_path / "g.air")
