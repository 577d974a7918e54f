"""Builds and runs the framework-free kernels' own C++ tests, with no TensorFlow: kernels/tests/kernels_test.cc (every
SIMD path against the portable loop, each dtype, tails, empty ranges, indices past 2^31, with the flags of
kernels/sources.json) and kernels/tests/sharding_test.cc (the sharding plan)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.helpers import ROOT


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_kernels_cc(tmp_path):
    with open(os.path.join(ROOT, "kernels", "sources.json")) as f:
        config = json.load(f)
    units = {src: [] for src in config["portable"]}
    if platform.machine().lower() in ("x86_64", "amd64"):
        units.update(config["x86_64"])
    base = ["g++", "-std=c++17", *config["flags"], f"-I{ROOT}", "-c"]

    def compile_unit(item):
        src, flags = item
        obj = str(tmp_path / (os.path.basename(src) + ".o"))
        subprocess.run([*base, *flags, os.path.join(ROOT, src), "-o", obj], check=True)
        return obj

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        objects = list(pool.map(compile_unit, units.items()))
    binary = str(tmp_path / "kernels_test")
    subprocess.run(["g++", "-std=c++17", *config["flags"], f"-I{ROOT}",
                    os.path.join(ROOT, "kernels", "tests", "kernels_test.cc"), *objects, "-o", binary], check=True)
    result = subprocess.run([binary], capture_output=True, text=True, timeout=300, check=False)
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all kernel tests passed" in result.stdout


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_sharding_cc(tmp_path):
    """kernels/tests/sharding_test.cc: the guided blocks of kernels/sharding.h under concurrent claims."""
    binary = str(tmp_path / "sharding_test")
    subprocess.run(["g++", "-std=c++17", "-O2", "-pthread", f"-I{ROOT}",
                    os.path.join(ROOT, "kernels", "tests", "sharding_test.cc"), "-o", binary], check=True)
    result = subprocess.run([binary], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all sharding tests passed" in result.stdout
