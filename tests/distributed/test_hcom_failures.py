"""What a data-parallel job does when its ranks do not agree (real MPI jobs, tests/helpers/mpi.py): a rank that left
or computes for ever makes the others fail within the (shortened) timeout, naming the rank and the node, and the
job ends; ranks with different Hcom sequences are refused at add_graph before any variable changes; ranks running
different graphs at once fail at the run's first Hcom node."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from tests.helpers.mpi import run_ranks

MODULE = "tests.helpers.hcom_ranks"
TIMEOUT = 3  # seconds: GRAPH_IR_HCOM_TIMEOUT for the ranks
ERROR = "graph_ir.distributed.group.HcomError: "


def _errors(stderr: str) -> list[str]:
    return [line[len(ERROR):] for line in stderr.splitlines() if line.startswith(ERROR)]


@pytest.mark.parametrize("ranks", [2, 4])
def test_a_rank_that_left_fails_the_others_within_the_timeout(tmp_path, ranks):
    start = time.monotonic()
    done = run_ranks(ranks, MODULE, "early_exit", str(tmp_path), timeout=90, hcom_timeout=TIMEOUT, check=False)
    took = time.monotonic() - start
    assert done.returncode != 0, done.stdout + done.stderr
    errors = _errors(done.stderr)
    timed_out = [e for e in errors if "did not complete within 3 s" in e and "gave up" not in e]
    assert timed_out, done.stderr
    # The first rank to time out names itself, the node, and the rank it never heard from.
    assert re.match(r"rank \d: HcomAllReduce 'grad_sum' .*did not complete within 3 s", timed_out[0])
    assert f"ranks not heard from (exited, stuck, or still computing): [{ranks - 1}]" in timed_out[0]
    if ranks > 2:  # the ranks that did join were heard from
        assert "ranks waiting at this collective too:" in timed_out[0]
    assert took < TIMEOUT + 45, took  # start-up, then one timeout: no hang


def test_a_stuck_rank_cannot_hang_the_job(tmp_path):
    """The last rank computes for ever instead of running: the others time out, and MPI_Abort ends the job."""
    start = time.monotonic()
    done = run_ranks(2, MODULE, "stuck", str(tmp_path), timeout=90, hcom_timeout=TIMEOUT, check=False)
    assert done.returncode != 0
    assert any(e.startswith("rank 0: HcomAllReduce 'grad_sum'") and "[1]" in e for e in _errors(done.stderr)), \
        done.stderr
    assert time.monotonic() - start < TIMEOUT + 45


def test_different_hcom_sequences_are_refused_at_add_graph(tmp_path):
    run_ranks(2, MODULE, "mismatch", str(tmp_path), timeout=120, hcom_timeout=30)
    for r in range(2):
        message = (tmp_path / f"rank{r}.txt").read_text()
        assert message.startswith("GraphError: graph 'sgd': the ranks' Hcom sequences differ at Hcom node #1"), message
        assert "ranks [0] have HcomAllReduce 'grad_sum' (fusion=0, fusion_id=-1, group='hccl_world_group', " \
               "reduction='sum'; inputs float32[6, 2])" in message
        assert "ranks [1] have HcomAllReduce 'grad_sum' (fusion=0, fusion_id=-1, group='hccl_world_group', " \
               "reduction='max'" in message
        with np.load(tmp_path / f"rank{r}.npz") as npz:
            assert npz["before"].tobytes() == npz["after"].tobytes()  # no variable changed


def test_hcom_nodes_named_otherwise_on_another_rank_join_and_run(tmp_path):
    """The sequences agree in what each collective does; names are reported, never compared."""
    run_ranks(2, MODULE, "renamed", str(tmp_path), timeout=120, hcom_timeout=30)
    weights = [np.load(tmp_path / f"rank{r}.npz")["w"] for r in range(2)]
    assert weights[0].tobytes() == weights[1].tobytes()


def test_ranks_running_different_graphs_fail_at_the_first_hcom_node(tmp_path):
    """Each rank finds the mismatch by itself, from the run's graph check; its group is then broken (the collective
    posted beside the check is unmatched), so the job ends in MPI_Abort rather than a clean exit."""
    job = run_ranks(2, MODULE, "run_mismatch", str(tmp_path), timeout=120, hcom_timeout=30, check=False)
    assert job.returncode != 0 and "MPI_Abort" in job.stderr, job.stderr
    assert "ranks [1] run a graph with another Hcom sequence" in (tmp_path / "rank0.txt").read_text()
    assert re.search(r"rank 1: HcomAllReduce 'grad_sum': ranks \[0\] run a graph with another Hcom sequence",
                     (tmp_path / "rank1.txt").read_text())
