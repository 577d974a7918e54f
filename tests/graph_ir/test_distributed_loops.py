"""Collectives inside a While body: several training steps per call (a tf.range loop around strategy.run) under
MultiWorkerMirroredStrategy with two workers on loopback, each lowering its own trace
(tests/helpers/distributed_loop_workers.py), then the two rank graphs run as a 2-rank MPI job
(tests/helpers/distributed_lowering_ranks.py) against TF's own multi-worker run of the same call: the loop's loss and
every variable within 1e-5 of scale, the ranks bitwise equal. The loop's trip count is the same on every rank (it
comes from constants), while each rank's own batch rides in the loop state: graph_ir/lowering/uniform.py judges a
While by its condition."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from tests.graph_ir.test_distributed_lowering import TIMEOUT, _scaled
from tests.helpers import ROOT
from tests.helpers.distributed import free_ports, run_workers
from tests.helpers.mpi import run_ranks


@pytest.mark.slow
@pytest.mark.parametrize("name", ["adam", "fused_ema_adam"])
def test_several_steps_per_call_run_their_collectives_in_a_while_body(tmp_path, name):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": ROOT}
    ports = ",".join(free_ports(2))
    run_workers([[sys.executable, "-m", "tests.helpers.distributed_loop_workers", str(i), ports, str(tmp_path), name]
                 for i in range(2)], env, ROOT, TIMEOUT)
    report = json.loads((tmp_path / f"{name}.json").read_text())
    assert "While" in report["types"] and not [t for t in report["types"] if t.startswith("Collective")]
    in_body = [op for op, _, graph in report["hcom"] if graph != "root" and "body" in graph]
    assert in_body.count("HcomAllReduce") >= 2, report["hcom"]  # the gradients' and the loss's, every iteration
    # the collectives' instance keys that TF threads through the loop do not become inputs of the rank's graph
    assert [n for n, _ in report["inputs"]] == ["xs", "ys"], report["inputs"]
    run_ranks(2, "tests.helpers.distributed_lowering_ranks", str(tmp_path), name, timeout=TIMEOUT, hcom_timeout=60)
    with np.load(tmp_path / name / "expected.npz") as f:
        expected = {k: f[k] for k in f.files}
    results = []
    for r in range(2):
        with np.load(tmp_path / name / f"result{r}.npz") as f:
            results.append({k: f[k] for k in f.files})
        assert _scaled(results[r]["losses"], expected["losses"]) < 1e-5, (results[r]["losses"], expected["losses"])
        for i, variable in enumerate(report["compared"]):
            assert _scaled(results[r][f"v{i}"], expected[f"v{i}_r{r}"]) < 1e-5, (r, variable)
            np.testing.assert_array_equal(results[r][f"v{i}"], results[0][f"v{i}"], err_msg=variable)
