"""graph_ir.executors.onednn reads TF_ENABLE_ONEDNN_OPTS as TF does: each value against TF's own IsMklEnabled, in a
process of its own (TF reads the variable once)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_PROBE = """
from tensorflow.python.util import _pywrap_util_port
from graph_ir.executors import onednn
print(int(_pywrap_util_port.IsMklEnabled()), int(onednn.onednn_enabled()), int(onednn.onednn_runs("float32")))
"""


@pytest.mark.parametrize("value", ["0", "FALSE", "1", "", "no", " 0", None])
def test_tf_enable_onednn_opts_is_read_as_tf_reads_it(value):
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    if value is not None:
        env["TF_ENABLE_ONEDNN_OPTS"] = value
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120,
                          check=True)
    tf_enabled, ours, float32_runs = (int(v) for v in done.stdout.split()[-3:])
    assert ours == tf_enabled, (value, done.stdout)
    if not tf_enabled:  # oneDNN off: TF runs every dtype on its Eigen kernels, and graph_ir follows them
        assert float32_runs == 0
