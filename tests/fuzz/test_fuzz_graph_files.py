"""The graph-file fuzz suite: real GE graphs mutated (truncated, bit-flipped, spliced; edges, dims, dtypes, attr
kinds and values, names, node order, duplicated and deleted fields) and fed to graph_ir.loads, Session.add_graph
and run_graph (tests/helpers/graph_file_fuzzer.py). It runs in a child process with a 3 GiB address-space limit and a
time limit: the child must exit 0, never die by a signal or run out of memory."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

from tests.helpers import ROOT

MEMORY_LIMIT = 3 * 2**30
CASES, SLOW_CASES = 3_000, 100_000


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _fuzz(first_seed: int, cases: int) -> dict:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "tests.helpers.graph_file_fuzzer", str(first_seed), str(cases)],
                            cwd=ROOT, capture_output=True, text=True, timeout=900, env=env, preexec_fn=_limit_memory,
                            check=False)
    assert result.returncode >= 0, f"the fuzzer died by signal {-result.returncode}: {result.stderr[-2000:]}"
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["bounded", "slow"])
def test_fuzz_graph_files_and_session(slow):
    counts = _fuzz(1_000_000 if slow else 0, SLOW_CASES if slow else CASES)
    assert counts["cases"] == (SLOW_CASES if slow else CASES)
    # Both sides of the property were exercised: refused files, and mutated files that loaded and ran.
    assert counts.get("load_error", 0) > 0 and counts.get("ran", 0) > 0, counts
