"""graph_ir.from_distributed on custom-loop steps under MirroredStrategy (2 and 4 logical CPUs, in a subprocess:
tests/helpers/distributed_lowering.py; the model kinds of tests/helpers/distributed_cases.py, slow): one GE graph per
rank, no TF collective left, Hcom ops of the world group,
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
from tests.helpers.distributed_cases import CASES, ZERO_GRADIENT_BOUND
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


def _check(report: dict, ranks: int, tolerance: float = 1e-5) -> None:
    """The rank graphs hold Hcom ops of the world group and no TF collective; each rank's loss and every variable
    within `tolerance` of scale of TF's run (its own replica's copy), the ranks' variables bitwise equal, but for the
    variables TF keeps per replica (report["per_replica"]) and those of exactly zero gradient
    (report["zero_gradient"]: rounding noise on both sides, within an absolute bound of their zero start:
    distributed_cases.ZERO_GRADIENT_BOUND)."""
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
    # the loss's strategy.reduce (Keras fit: a gather of the replicas' logs) and the gradients' all-reduce
    assert sum(op in ("HcomAllReduce", "HcomAllGather") for op, _ in hcom[0]) >= 2
    assert all(v == report["variables"][0] for v in report["variables"])
    assert report["same_structure"] and report["loaded_same"]
    assert report["missing_ops"] == {}
    compared, expected, results = report["compared"], report["expected"], report["results"]
    assert set(compared) == set(report["variables"][0]), "every GE Variable is compared with its TF variable"
    per_replica, zero = set(report.get("per_replica", ())), set(report.get("zero_gradient", ()))
    assert per_replica <= set(compared) and zero <= set(compared)
    for r, result in enumerate(results):
        assert _scaled(result["losses"], expected["losses"]) < tolerance, (r, result["losses"], expected["losses"])
        for i, name in enumerate(compared):
            ours, theirs = result[f"v{i}"], expected[f"v{i}_r{r}"]
            if name in zero:
                bound = ZERO_GRADIENT_BOUND[report["case"]]
                assert max(np.max(np.abs(ours)), np.max(np.abs(theirs))) <= bound, (r, name, bound)
            else:
                assert _scaled(ours, theirs) < tolerance, (r, name)
            if name not in per_replica:
                np.testing.assert_array_equal(ours, results[0][f"v{i}"], err_msg=f"{name}: rank {r}")


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


# Issue 46 item 4's other kinds of steps (tests/helpers/distributed_cases.py), K steps on 2 and on 4 ranks: one
# lowering process and one MPI job per rank count for all of them; on 4 ranks also the kinds the default tests run on
# 2 (sparse gradients, the float32 LossScaleOptimizer), so that every kind runs on 4 ranks too.
AT_FOUR = ("embedding_adam", "loss_scale_sgd")


@pytest.fixture(scope="module")
def kind_runs(tmp_path_factory):
    """kind_runs(n): the reports of the run on n ranks, made once."""
    runs: dict[int, dict[str, dict]] = {}

    def get(n: int) -> dict[str, dict]:
        if n not in runs:
            runs[n] = _run(n, tmp_path_factory.mktemp(f"kinds{n}"), CASES if n == 2 else (*CASES, *AT_FOUR))
        return runs[n]

    return get


@pytest.fixture(scope="module", params=[2, 4], ids=["2ranks", "4ranks"])
def kinds(request, kind_runs) -> dict[str, dict]:
    return kind_runs(request.param)


def _value(report: dict, r: int, part: str, source: str = "results") -> np.ndarray:
    """Rank r's value (source "results") or TF replica r's ("expected") of the one compared variable naming `part`."""
    [i] = [i for i, name in enumerate(report["compared"]) if part in name]
    return report[source][r][f"v{i}"] if source == "results" else report["expected"][f"v{i}_r{r}"]


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_model_kinds(kinds, name):
    """Each rank's loss and every weight, slot and counter against TF's MirroredStrategy run (mixed_float16: 1e-3)."""
    report = kinds[name]
    _check(report, report["ranks"], 1e-3 if name == "mixed_loss_scale" else 1e-5)


@pytest.mark.slow
def test_batch_norm_statistics_are_per_rank(kinds):
    """Plain BatchNormalization: each rank's moving mean and variance are its replica's (they differ between the
    ranks, as TF's copies do); the dense bias before it has a zero gradient (named, bounded)."""
    report = kinds["bn_sgd"]
    assert len(report["per_replica"]) == 2 and all("moving_" in n for n in report["per_replica"])
    assert [n.endswith("bias") for n in report["zero_gradient"]] == [True]
    for part in ("moving_mean", "moving_variance"):
        ours = [_value(report, r, part) for r in range(report["ranks"])]
        theirs = [_value(report, r, part, "expected") for r in range(report["ranks"])]
        assert not np.array_equal(ours[0], ours[1]) and not np.array_equal(theirs[0], theirs[1])


@pytest.mark.slow
def test_synchronized_batch_norm_all_reduces_its_moments(kinds):
    """BatchNormalization(synchronized=True): the moments' sums all-reduced (keras/src/backend/tensorflow/nn.py
    moments: sum, sum of squares, count) and, backwards, the gradients of the two sums that reach the weights (the
    gradient of an all-sum is an all-sum: tensorflow/python/distribute/distribute_lib.py ReplicaContext.all_reduce's
    grad_wrapper), so that the moving statistics are the same on every rank (_check: bitwise)."""
    report, plain = kinds["sync_bn_sgd"], kinds["bn_sgd"]
    count = [sum(op == "HcomAllReduce" for op, _ in r["hcom"][0]) for r in (report, plain)]
    assert count[0] == count[1] + 3 + 2 and report["per_replica"] == []
    assert len(report["zero_gradient"]) == 1


@pytest.mark.slow
def test_attention_key_bias_has_a_zero_gradient(kinds):
    assert [n.endswith("key/bias") for n in kinds["transformer_adam"]["zero_gradient"]] == [True]


@pytest.mark.slow
def test_mixed_float16_skips_the_step_tf_skips(kinds):
    """mixed_float16 with Keras's LossScaleOptimizer: the first step's float16 gradients overflow (its initial
    scale), TF skips it and applies the others; every rank does the same (counters and scale equal to TF's). Keras's
    step_counter counts the applies since the last skip (keras/src/optimizers/loss_scale_optimizer.py), so equal
    counters mean the same step was skipped."""
    report = kinds["mixed_loss_scale"]
    for part in ("iteration", "dynamic_scale", "step_counter"):
        for r in range(report["ranks"]):
            np.testing.assert_array_equal(_value(report, r, part), _value(report, r, part, "expected"), part)
    applied = int(_value(report, 0, "iteration", "expected"))
    assert 0 < applied < len(report["expected"]["losses"]), "TF skipped one step and applied the others"


@pytest.mark.slow
def test_keras_fit(kinds):
    """The tf.function model.fit runs for each batch (Keras's one_step_on_data: strategy.run(train_step), then
    reduce_per_replica's mean of the stacked logs: an all-gather), lowered, against TF's model.fit on the same
    batches (the logs' loss after each); the loss tracker's sums are per rank, as TF's are per replica."""
    report = kinds["fit_sgd"]
    assert "HcomAllGather" in {op for op, _ in report["hcom"][0]}
    assert sorted(n.split("/")[-1] for n in report["per_replica"]) == ["count", "total"]


@pytest.mark.slow
@pytest.mark.parametrize("name", AT_FOUR)
def test_earlier_kinds_on_four_ranks(kind_runs, name):
    report = kind_runs(4)[name]
    _check(report, 4)
    assert ("HcomAllGather" if name.startswith("embedding_") else "If") in {t for t in report["types"][0]}
