"""graph_ir.from_distributed on custom-loop steps under MirroredStrategy (2 and 4 logical CPUs, in a subprocess:
tests/helpers/distributed_lowering.py): one GE graph per rank, no TF collective left, Hcom ops of the world group,
the ranks' graphs the same structure with the same Variable names, .air files that load, missing_ops empty; and K
steps of the rank graphs' .air files run as an MPI job (mpiexec -n N, graph_ir/distributed's Hcom engine:
tests/helpers/distributed_lowering_ranks.py) against TF's own MirroredStrategy run: each rank's loss and every
variable within 1e-5 of scale, the ranks' variables bitwise equal. The same for two MultiWorkerMirroredStrategy
workers, each lowering its own trace (tests/helpers/distributed_workers.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import ROOT
from tests.helpers.distributed import free_ports, run_workers
from tests.helpers.mpi import run_ranks

TESTED = ("CollectiveReduceV2", "CollectiveGatherV2", "CollectiveBcastSend")  # test_family_ops.py PER_OP_TESTS
TIMEOUT = 600
OPTIMIZERS = ("sgd", "adam", "fused_ema_adam", "powersign")
# An Embedding's sparse gradients: gathered across replicas (CollectiveGatherV2 in tf.cond branches -> HcomAllGather)
SPARSE = ("embedding_sgd", "embedding_adam")
# Keras's LossScaleOptimizer: its cross-replica cond split by rank, the finite check all-reduced with "min"
LOSS_SCALE = ("loss_scale_sgd",)


def _run(n: int, folder, names) -> dict[str, dict]:
    """Lowers (and runs in TF) in a process with n logical CPUs, then runs the rank graphs as an n-rank MPI job."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": ROOT}
    result = subprocess.run([sys.executable, "-m", "tests.helpers.distributed_lowering", str(n), str(folder), *names],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    run_ranks(n, "tests.helpers.distributed_lowering_ranks", str(folder), *names, timeout=TIMEOUT, hcom_timeout=60)
    reports = {}
    for name in names:
        report = json.loads((folder / f"{name}.json").read_text())
        with np.load(folder / name / "expected.npz") as f:
            report["expected"] = {k: f[k] for k in f.files}
        report["results"] = []
        for r in range(n):
            with np.load(folder / name / f"result{r}.npz") as f:
                report["results"].append({k: f[k] for k in f.files})
        reports[name] = report
    return reports


def _scaled(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b))))) if a.size else 0.0


def _check(report: dict, ranks: int) -> None:
    assert report["ranks"] == ranks
    for types in report["types"]:
        assert not [t for t in types if t.startswith("Collective")], types
        assert "HcomAllReduce" in types
    hcom = report["hcom"]
    assert all(h == hcom[0] for h in hcom), "the ranks' Hcom ops differ"
    for op, attrs in hcom[0]:
        assert attrs["group"] == "hccl_world_group"
        if op == "HcomAllReduce":
            assert attrs["reduction"] in ("sum", "min")
    # the loss's strategy.reduce and the gradients' all-reduce
    assert sum(op == "HcomAllReduce" for op, _ in hcom[0]) >= 2
    assert all(v == report["variables"][0] for v in report["variables"])
    assert report["same_structure"] and report["loaded_same"]
    assert report["missing_ops"] == {}
    compared, expected, results = report["compared"], report["expected"], report["results"]
    assert set(compared) == set(report["variables"][0]), "every GE Variable is compared with its TF variable"
    for r, result in enumerate(results):
        assert _scaled(result["losses"], expected["losses"]) < 1e-5, (r, result["losses"], expected["losses"])
        for i, name in enumerate(compared):
            assert _scaled(result[f"v{i}"], expected[f"v{i}_r{r}"]) < 1e-5, (r, name)
            np.testing.assert_array_equal(result[f"v{i}"], results[0][f"v{i}"], err_msg=f"{name}: rank {r}")


@pytest.fixture(scope="module")
def two_replicas(tmp_path_factory) -> dict[str, dict]:
    return _run(2, tmp_path_factory.mktemp("two"), (*OPTIMIZERS, *SPARSE, *LOSS_SCALE))


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_two_replicas(two_replicas, name):
    _check(two_replicas[name], 2)
    # Keras's iterations counter, computed once for all replicas: rank 0's value broadcast on every rank
    broadcasts = [attrs for op, attrs in two_replicas[name]["hcom"][0] if op == "HcomBroadcast"]
    assert broadcasts and all(a["root_rank"] == 0 for a in broadcasts), two_replicas[name]["hcom"][0]


@pytest.mark.parametrize("name", SPARSE)
def test_sparse_gradients_are_gathered(two_replicas, name):
    report = two_replicas[name]
    _check(report, 2)
    gathers = [attrs for op, attrs in report["hcom"][0] if op == "HcomAllGather"]
    assert gathers and all(a["rank_size"] == 2 and a["group"] == "hccl_world_group" for a in gathers)
    assert "If" in report["types"][0]  # TF's all-gather of IndexedSlices branches on the replicas' row counts


@pytest.mark.parametrize("name", LOSS_SCALE)
def test_loss_scale_optimizer_decides_alike_on_every_rank(two_replicas, name):
    """The cond Keras builds in merge_call (on replica 0's finite check, holding every replica's update) becomes, on
    each rank, a cond on that rank's check all-reduced with "min": the ranks skip a step together, as Ascend's
    NPULossScaleOptimizer(is_distributed=True) does; with finite gradients, TF's steps."""
    report = two_replicas[name]
    _check(report, 2)
    assert ("HcomAllReduce", "min") in {(op, attrs.get("reduction")) for op, attrs in report["hcom"][0]}
    assert "If" in report["types"][0]


def test_multi_worker_mirrored_strategy(tmp_path):
    """Two MultiWorkerMirroredStrategy workers (loopback gRPC) each lower their trace (one replica: one graph, rank =
    the worker's index); the two .air files run as a 2-rank MPI job against TF's multi-worker run."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": ROOT}
    ports = ",".join(free_ports(2))
    run_workers([[sys.executable, "-m", "tests.helpers.distributed_workers", str(i), ports, str(tmp_path), "adam"]
                 for i in range(2)], env, ROOT, TIMEOUT)
    run_ranks(2, "tests.helpers.distributed_lowering_ranks", str(tmp_path), "adam", timeout=TIMEOUT, hcom_timeout=60)
    report = json.loads((tmp_path / "adam.json").read_text())
    assert report["ranks"] == 1 and {op for op, _ in report["hcom"]} == {"HcomAllReduce"}
    with np.load(tmp_path / "adam" / "expected.npz") as f:
        expected = {k: f[k] for k in f.files}
    results = []
    for r in range(2):
        with np.load(tmp_path / "adam" / f"result{r}.npz") as f:
            results.append({k: f[k] for k in f.files})
        assert _scaled(results[r]["losses"], expected["losses"]) < 1e-5
        for i, name in enumerate(report["compared"]):
            assert _scaled(results[r][f"v{i}"], expected[f"v{i}_r{r}"]) < 1e-5, (r, name)
            np.testing.assert_array_equal(results[r][f"v{i}"], results[0][f"v{i}"], err_msg=name)


def test_four_replicas(tmp_path):
    _check(_run(4, tmp_path, ["adam"])["adam"], 4)
