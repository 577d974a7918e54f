"""graph_ir.compare.compare_step on one rank against its TF replica: an MPI job whose ranks are also
MultiWorkerMirroredStrategy workers on loopback (tests/helpers/compare_ranks.py). Each rank lowers its own trace and
compares its graph with the same step in TF, node by node, the Hcom nodes included (run isolated on TF's inputs on
every rank at once; never the float64 re-run, which only some ranks might make). A wrong collective is found."""

from __future__ import annotations

import json

import pytest

from tests.helpers.distributed import free_ports
from tests.helpers.mpi import run_ranks


@pytest.mark.slow
def test_each_rank_compares_with_its_tf_replica_and_a_wrong_collective_is_the_first_defect(tmp_path):
    run_ranks(2, "tests.helpers.compare_ranks", ",".join(free_ports(2)), str(tmp_path), timeout=300,
              hcom_timeout=60)
    for r in range(2):
        report = json.loads((tmp_path / f"rank{r}.json").read_text())
        lowered, wrong = report["lowered"], report["wrong_reduction"]
        # no defect; a row may be out of tolerance accumulated only (Adam's first-step m / (sqrt(v) + eps)
        # amplifies the rounding it carries in), as in a one-device comparison
        assert lowered["first_defect"] is None and all(verdict != "defect" for _, _, verdict, _, _ in lowered["out"])
        assert lowered["variables"] >= 4, lowered  # the weights and Adam's slots, after the step
        # the gradients' and the loss's all-reduce, compared accumulated and isolated
        assert len(lowered["hcom"]) >= 2 and all(within and isolated for _, _, tf_type, within, isolated
                                                 in lowered["hcom"] if tf_type == "CollectiveReduceV2"), lowered
        assert not wrong["within"] and wrong["first_defect"][1] == "HcomAllReduce", wrong
