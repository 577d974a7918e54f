"""Hcom graphs run as real MPI jobs on this machine (mpiexec -n 2 and -n 4, tests/helpers/mpi.py): every Hcom op
and reduction against NumPy over the ranks' inputs, every rank's copy of a shared result bitwise equal; a 2-rank
data-parallel SGD step equal to the single-process full-batch step; each rank's saved .air loads and runs."""

from __future__ import annotations

import numpy as np
import pytest

import graph_ir
from tests.helpers import hcom_ranks
from tests.helpers.mpi import run_ranks

MODULE = "tests.helpers.hcom_ranks"
SHARED = ("HcomAllReduce", "HcomAllGather")  # the same result on every rank


def _results(out, ranks: int) -> list[dict[str, np.ndarray]]:
    found = []
    for r in range(ranks):
        with np.load(out / f"rank{r}.npz") as npz:
            found.append({k: npz[k] for k in npz.files})
    return found


@pytest.mark.parametrize("ranks", [2, 4])
def test_every_collective_matches_numpy_over_the_ranks(tmp_path, ranks):
    run_ranks(ranks, MODULE, "collectives", str(tmp_path), timeout=180, hcom_timeout=60)
    results = _results(tmp_path, ranks)
    for r, got in enumerate(results):
        want = hcom_ranks.expected(ranks, r)
        assert sorted(got) == sorted(want)
        for name, value in want.items():
            assert got[name].dtype == value.dtype and got[name].shape == value.shape, (r, name)
            # Bitwise: the expected values reduce in the order the executors document (rank order, float16 through
            # float32), so any difference is a wrong element, not rounding.
            assert got[name].tobytes() == value.tobytes(), (r, name, got[name], value)
    shared = [c[0] for c in hcom_ranks.CASES if c[1] in SHARED] + [f"bc_{k}" for k in range(len(hcom_ranks.BROADCAST))]
    for name in shared:
        assert all(res[name].tobytes() == results[0][name].tobytes() for res in results), name


def test_float_sums_are_close_to_the_exact_sum(tmp_path):
    """The rank-order sums are the float32 (float16: float32, rounded once) sums of the ranks' values: within a
    few ulps of the float64 sum."""
    want = hcom_ranks.expected(4, 0)
    xs = [hcom_ranks.case_input("ar_sum_float32", "float32", 6, r).astype(np.float64) for r in range(4)]
    np.testing.assert_allclose(want["ar_sum_float32"], sum(xs), rtol=1e-6, atol=1e-6)
    xs16 = [hcom_ranks.case_input("ar_sum_float16", "float16", 6, r).astype(np.float64) for r in range(4)]
    assert np.array_equal(want["ar_sum_float16"], sum(xs16).astype(np.float16))  # exact sum, rounded once


def _single_process_steps() -> tuple[np.ndarray, list[float]]:
    _, x, y = hcom_ranks.sgd_data()
    session = graph_ir.Session()
    session.add_graph(0, hcom_ranks.sgd_graph(hcom_ranks.GLOBAL_BATCH, None))
    losses = [float(session.run_graph(0, [x, y])[1]) for _ in range(hcom_ranks.STEPS)]
    return session.get_variables(["w"])[0], losses


def test_data_parallel_sgd_equals_the_full_batch_step(tmp_path):
    run_ranks(2, MODULE, "sgd", str(tmp_path), timeout=120, hcom_timeout=60)
    results = _results(tmp_path, 2)
    assert results[0]["w"].tobytes() == results[1]["w"].tobytes()  # every rank the same weights, bitwise
    w_single, losses = _single_process_steps()
    w0 = hcom_ranks.sgd_data()[0]
    assert not np.allclose(results[0]["w"], w0)  # the steps did move the weights
    np.testing.assert_allclose(results[0]["w"], w_single, rtol=0, atol=1e-6)
    # Each rank's loss is its half's; their mean is the full batch's loss.
    mean_loss = (results[0]["losses"].astype(np.float64) + results[1]["losses"]) / 2
    np.testing.assert_allclose(mean_loss, losses, rtol=1e-5)

    # Each rank's .air parses and loads: the same graph, its Hcom node kept with its attributes.
    for r in range(2):
        loaded = graph_ir.load(str(tmp_path / f"rank{r}.air"))
        node = loaded.nodes["grad_sum"]
        assert (node.type, node.attrs["reduction"], node.attrs["group"], node.attrs["fusion"]) == \
               ("HcomAllReduce", "sum", "hccl_world_group", 0)
    # A session without a group refuses it by name.
    with pytest.raises(graph_ir.GraphError, match=r"HcomAllReduce 'grad_sum': this Session has no group"):
        graph_ir.Session().add_graph(0, graph_ir.load(str(tmp_path / "rank0.air")))


def test_the_cli_runs_a_saved_graph_on_every_rank(tmp_path):
    """`mpiexec -n 2 python -m graph_ir run graph.air --inputs in{rank}.npz --out out{rank}.npz`."""
    run_ranks(2, MODULE, "sgd", str(tmp_path), timeout=120, hcom_timeout=60)
    _, x, y = hcom_ranks.sgd_data()
    half = hcom_ranks.GLOBAL_BATCH // 2
    for r in range(2):
        np.savez(tmp_path / f"in{r}.npz", x=x[r * half:(r + 1) * half], y=y[r * half:(r + 1) * half])
    done = run_ranks(2, "graph_ir", "run", str(tmp_path / "rank0.air"), "--inputs", str(tmp_path / "in{rank}.npz"),
                     "--out", str(tmp_path / "out{rank}.npz"), "--steps", str(hcom_ranks.STEPS), timeout=120,
                     hcom_timeout=60)
    assert "rank 0: output_0: float32[6, 2]" in done.stdout and "rank 1: output_0" in done.stdout
    outs = [np.load(tmp_path / f"out{r}.npz")["output_0"] for r in range(2)]
    assert outs[0].tobytes() == outs[1].tobytes() == _results(tmp_path, 2)[0]["w"].tobytes()


def test_the_cli_compares_each_ranks_dumps_and_names_a_wrong_collective(tmp_path):
    """`mpiexec -n 2 python -m graph_ir compare rank{rank}.air dumps{rank} --inputs in{rank}.npz`: each rank's
    dumps (written by --write-dumps under the same job) agree with its run; a rank whose dump of the all-reduce is
    wrong has that node as its departure (exit 1), every rank still running every collective."""
    from graph_ir.compare import read_dump_folder, write_dump

    run_ranks(2, MODULE, "sgd", str(tmp_path), timeout=120, hcom_timeout=60)
    _, x, y = hcom_ranks.sgd_data()
    half = hcom_ranks.GLOBAL_BATCH // 2
    for r in range(2):
        np.savez(tmp_path / f"in{r}.npz", x=x[r * half:(r + 1) * half], y=y[r * half:(r + 1) * half])
    common = [str(tmp_path / "rank{rank}.air"), str(tmp_path / "dumps{rank}"), "--inputs",
              str(tmp_path / "in{rank}.npz")]
    run_ranks(2, "graph_ir", "compare", *common, "--write-dumps", timeout=120, hcom_timeout=60)
    done = run_ranks(2, "graph_ir", "compare", *common, timeout=120, hcom_timeout=60)
    assert done.stdout.count("first departure: none") == 2, done.stdout
    dump = read_dump_folder(str(tmp_path / "dumps1"))["grad_sum"]
    # rank 1's NPU got another sum
    write_dump(dump.path, dump.op_name, dump.inputs, [o * 2.0 for o in dump.outputs], dump.dump_time)
    done = run_ranks(2, "graph_ir", "compare", *common, timeout=120, hcom_timeout=60, check=False)
    assert done.returncode != 0 and "first departure: grad_sum" in done.stdout, done.stdout
