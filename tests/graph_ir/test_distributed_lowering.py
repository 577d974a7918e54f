"""graph_ir.from_distributed on custom-loop steps under MirroredStrategy (2 and 4 logical CPUs, in a subprocess:
tests/helpers/distributed_lowering.py): one GE graph per rank, no TF collective left, Hcom ops of the world group,
the ranks' graphs the same structure with the same Variable names, .air files that load, missing_ops empty; and K
steps of the rank graphs (run by the test-only stand-in for HCCL, tests/helpers/hcom_standin.py) against TF's own
MirroredStrategy run: each rank's loss and every variable within 1e-5 of scale, the ranks' variables bitwise equal."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT

TIMEOUT = 600
OPTIMIZERS = ("sgd", "adam", "fused_ema_adam", "powersign")


def _run(n: int, folder, names) -> dict[str, dict]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": ROOT}
    result = subprocess.run([sys.executable, "-m", "tests.helpers.distributed_lowering", str(n), str(folder), *names],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return {name: json.loads((folder / f"{name}.json").read_text()) for name in names}


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
            assert attrs["reduction"] == "sum"
    # the loss's strategy.reduce and the gradients' all-reduce
    assert sum(op == "HcomAllReduce" for op, _ in hcom[0]) >= 2
    assert all(v == report["variables"][0] for v in report["variables"])
    assert report["same_structure"] and report["loaded_same"]
    assert report["missing_ops"] == {}
    assert report["loss_diff"] < 1e-5, report["loss_diff"]
    assert report["variable_diff"] < 1e-5, report["variable_diff"]
    assert report["ranks_bitwise_equal"]
    assert any(name.endswith("kernel") for name in report["compared"])


@pytest.fixture(scope="module")
def two_replicas(tmp_path_factory) -> dict[str, dict]:
    return _run(2, tmp_path_factory.mktemp("two"), OPTIMIZERS)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_two_replicas(two_replicas, name):
    _check(two_replicas[name], 2)


def test_four_replicas(tmp_path):
    _check(_run(4, tmp_path, ["adam"])["adam"], 4)
