"""A training script ported to Ascend's collective API (tf_plugin.hccl.hccl_ops: a start-up broadcast of every variable
from rank 0, the gradients all-reduced and divided by the rank count; tests/helpers/hccl_tf_training.py) run as 2 CPU
ranks under mpiexec equals TF's MirroredStrategy run of the same steps on 2 logical CPUs, and the same step lowered
with graph_ir.from_tensorflow on each rank (Hcom nodes 1:1) and run under graph_ir.Session on 2 ranks equals the
TF-op run: each loss and every variable within 1e-5 of scale over K steps, the ranks' variables bitwise equal."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import ROOT
from tests.helpers.hccl_tf_training import FEATURES, STEPS
from tests.helpers.mpi import run_ranks
from tests.helpers.train_steps import scaled_difference

TOLERANCE = 1e-5


def _load(path) -> dict[str, np.ndarray]:
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.slow
def test_the_ported_script_equals_mirrored_strategy_and_its_lowering(tmp_path):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-m", "tests.helpers.hccl_tf_training", "mirrored", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    run_ranks(2, "tests.helpers.hccl_tf_training", "ranks", str(tmp_path), timeout=300, hcom_timeout=60)
    mirrored = _load(tmp_path / "mirrored.npz")
    tf_runs = [_load(tmp_path / f"tf{r}.npz") for r in range(2)]
    ge_runs = [_load(tmp_path / f"ge{r}.npz") for r in range(2)]
    assert sorted(tf_runs[0]) == sorted(mirrored) and len(mirrored["losses"]) == STEPS
    assert any(k.endswith("momentum") for k in mirrored)  # the optimizer's state is compared too
    for name, want in mirrored.items():
        for runs in (tf_runs, ge_runs):
            assert runs[0][name].tobytes() == runs[1][name].tobytes(), name  # every rank the same, bitwise
        assert scaled_difference(tf_runs[0][name], want) <= TOLERANCE, (name, tf_runs[0][name], want)
        assert scaled_difference(ge_runs[0][name], tf_runs[0][name]) <= TOLERANCE, name
    assert not np.allclose(mirrored["sequential/dense/kernel"], _initial())  # the steps moved the weights

    for r in range(2):  # the lowering is 1:1: the TF step's Hcom ops are the graph's Hcom nodes, attributes and all
        report = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert report["ge"] == report["tf"] and len(report["tf"]) == 5  # 4 gradients and the loss
        assert report["tf"][0] == ["HcomAllReduce", {"reduction": "sum", "group": "hccl_world_group", "fusion": 1,
                                                     "fusion_id": -1}]


def _initial() -> np.ndarray:
    """Rank 0's initial first kernel (the weights every rank gets by the broadcast): the steps moved away from it."""
    return np.random.default_rng(0).standard_normal((FEATURES, 8)).astype(np.float32) * 0.5
