"""scripts/setup_env.sh skips the build (minutes of C++) while .venv's stamp matches scripts/build_stamp.py's hash of
every build input: that hash must cover every file setup.py compiles, includes or generates from, and change when
one of them (or TensorFlow's version) does; the script prints one line per stage and hides setuptools' warning box,
not pip's failures."""

from __future__ import annotations

import importlib.util
import os
import re
import runpy
import subprocess
from unittest import mock

import pytest

from tests.helpers import ROOT

SCRIPT = os.path.join(ROOT, "scripts", "setup_env.sh")


@pytest.fixture(scope="module")
def build_stamp():
    spec = importlib.util.spec_from_file_location("build_stamp", os.path.join(ROOT, "scripts", "build_stamp.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _setup_py() -> tuple[dict, dict]:
    """setup.py's module globals and the keyword arguments it passes to setup(), without building anything."""
    with mock.patch("setuptools.setup") as setup:
        cwd = os.getcwd()
        try:
            os.chdir(ROOT)
            names = runpy.run_path(os.path.join(ROOT, "setup.py"))
        finally:
            os.chdir(cwd)
    return names, setup.call_args.kwargs


def _included(source: str) -> set[str]:
    """The repository files `source` #includes, transitively (quoted includes resolved from the root)."""
    seen, todo = set(), [source]
    while todo:
        with open(os.path.join(ROOT, todo.pop())) as f:
            for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', f.read(), flags=re.MULTILINE):
                if os.path.isfile(os.path.join(ROOT, name)) and name not in seen:
                    seen.add(name)
                    todo.append(name)
    return seen


def test_the_stamp_hashes_every_input_setup_py_builds_from(build_stamp):
    names, kwargs = _setup_py()
    sources = {s for ext in kwargs["ext_modules"] for s in [*ext.sources, *ext.depends]}
    assert "graph_ir/cc/binding.cc" in sources and "tf_plugin/cc/isa_info.cc" in sources
    needed = set(sources)
    for source in sources:
        needed |= _included(source)
    needed |= {"setup.py", "pyproject.toml", "kernels/sources.json", "op_spec/codegen.py", "op_spec/version.py",
               "scripts/setup_env.sh", names["GE_PROTO"], names["DUMP_PROTO"]}
    hashed = set(build_stamp.input_files())
    assert not needed - hashed, sorted(needed - hashed)
    assert not [f for f in hashed if f.endswith((".so", ".o", ".pyc"))]
    # what the build writes is not an input (else the stamp would never match after a build)
    assert not {names["GE_DESCRIPTOR_SET"], "tf_plugin/_build_info.py", names["GENERATED_HEADER"]} & hashed


def test_the_stamp_changes_with_any_input_and_with_tensorflow(build_stamp, tmp_path, monkeypatch):
    for rel in ("setup.py", "pyproject.toml", "kernels/dispatch.cc", "op_spec/codegen.py", "graph_ir/cc/binding.cc",
                "tf_plugin/cc/ops/x.cc", "graph_ir/other.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"// {rel}\n")
    monkeypatch.setattr(build_stamp, "tensorflow_version", lambda: "tensorflow-cpu==2.21.0")
    first = build_stamp.stamp(str(tmp_path))
    assert build_stamp.stamp(str(tmp_path)) == first
    (tmp_path / "graph_ir/other.py").write_text("# Python is not compiled: an editable install sees it as it is\n")
    (tmp_path / "kernels/__pycache__").mkdir()
    (tmp_path / "kernels/__pycache__/x.pyc").write_text("x")
    assert build_stamp.stamp(str(tmp_path)) == first
    (tmp_path / "kernels/dispatch.cc").write_text("// kernels/dispatch.cc changed\n")
    second = build_stamp.stamp(str(tmp_path))
    assert second != first
    (tmp_path / "tf_plugin/cc/ops/y.h").write_text("")
    third = build_stamp.stamp(str(tmp_path))
    assert third != second
    monkeypatch.setattr(build_stamp, "tensorflow_version", lambda: "tensorflow-cpu==2.21.1")
    assert build_stamp.stamp(str(tmp_path)) != third


def test_setup_env_skips_the_build_only_on_a_matching_stamp_and_an_import():
    with open(SCRIPT) as f:
        text = f.read()
    subprocess.run(["bash", "-n", SCRIPT], check=True)
    assert text.index("up to date, nothing to build") < text.index("pip install")
    assert "scripts/build_stamp.py" in text and "import tf_plugin, graph_ir._binding" in text
    assert "set -euo pipefail" in text  # a failing pip stops the script: no pip line hides its status
    assert not [line for line in text.splitlines() if "pip install" in line and "||" in line and "upgrade pip" not in line]
    for stage in ("creating .venv", "installing TensorFlow and build tools", "building tf_plugin (C++"):
        assert f'say "{stage}' in text


def test_the_pip_filter_hides_the_setuptools_box_and_keeps_failures(tmp_path):
    with open(SCRIPT) as f:
        quiet = re.search(r"^quiet\(\) \{\n.*?^\}\n", f.read(), flags=re.DOTALL | re.MULTILINE).group(0)
    box = ("building\n/x/setuptools/command/editable_wheel.py:576: InformationOnly: Editable installation.\n!!\n\n"
           f"        {'*' * 80}\n        Please be careful with folders in your working directory.\n"
           f"        {'*' * 80}\n\n!!\n  InformationOnly.emit(\"Editable installation.\", msg)\n"
           "WARNING: something is ignored\nERROR: a real failure\n  its detail\n\nend\n")
    (tmp_path / "out.txt").write_text(box)
    code = f"set -euo pipefail\n{quiet}quiet cat {tmp_path / 'out.txt'}\nquiet bash -c 'echo failing; exit 3'\necho unreached\n"
    done = subprocess.run(["bash", "-c", code], capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 3
    assert done.stdout == "building\nERROR: a real failure\n  its detail\n\nend\nfailing\n"
