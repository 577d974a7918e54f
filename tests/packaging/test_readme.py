"""Every fenced ```python block of the README runs as written, in a fresh process (imports included)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT


def _blocks() -> list[str]:
    with open(os.path.join(ROOT, "README.md")) as f:
        return re.findall(r"^```python\n(.*?)^```$", f.read(), flags=re.DOTALL | re.MULTILINE)


def test_the_readme_has_python_examples():
    assert len(_blocks()) >= 3


@pytest.mark.parametrize("index", range(len(_blocks())))
def test_readme_python_block_runs(index, tmp_path):
    script = tmp_path / f"block{index}.py"
    script.write_text(_blocks()[index])
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300, env=env, check=False)
    assert result.returncode == 0, f"README block {index} failed:\n{_blocks()[index]}\n{result.stderr[-3000:]}"
