"""What graph_ir.from_distributed refuses, by name, and the branches it lowers (MirroredStrategy on 2 logical CPUs,
in a subprocess: tests/helpers/distributed_refusals.py): a branch around a collective lowers when its predicate is the
same on every rank (a variable, an all-reduced value) and is refused, naming the If, when it is not (the rank's own
data, its replica id), since ranks taking different branches hang in HCCL; Keras's LossScaleOptimizer under
MirroredStrategy (one cross-replica cond holding every replica's update) lowers; from_tensorflow refuses a
tf.distribute step, naming from_distributed; a stack of the replicas' values (Keras fit's logs) is an all-gather, and a
node reading one tensor twice keeps both inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("refusals")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": ROOT}
    result = subprocess.run([sys.executable, "-m", "tests.helpers.distributed_refusals", str(folder)], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((folder / "cases.json").read_text())


def test_a_branch_on_the_ranks_own_data_around_a_collective_is_refused_by_name(cases):
    message = cases["data_cond"]["refused"]
    assert "If 'cond'" in message and "not the same on every rank" in message and "all-reduce" in message


def test_a_branch_on_the_replica_id_is_refused(cases):
    assert "differs from rank 0's" in cases["replica_id_cond"]["refused"]


@pytest.mark.parametrize("case", ["uniform_cond", "reduced_cond"])
def test_a_branch_every_rank_takes_alike_lowers(cases, case):
    lowered = cases[case]["lowered"]
    assert cases[case]["ranks"] == 2 and "If" in lowered and "HcomAllReduce" in lowered


def test_mean_is_a_sum_then_a_divide(cases):
    # replica_context.all_reduce(MEAN) (final_op Div) and strategy.reduce(MEAN) (AddN, then the divide)
    assert cases["mean"]["lowered"] == ["HcomAllReduce", "HcomAllReduce"] and cases["mean"]["divides"] >= 2


def test_loss_scale_optimizer_under_mirrored_strategy_lowers(cases):
    # its cross-replica cond split by rank (numbers: tests/graph_ir/test_distributed_lowering.py)
    assert "If" in cases["loss_scale_optimizer"]["lowered"]
    assert cases["loss_scale_optimizer_missing"]["missing"] == {}


def test_from_tensorflow_names_from_distributed(cases):
    assert "graph_ir.from_distributed" in cases["from_tensorflow"]["refused"]


def test_a_loop_around_strategy_run_is_refused_by_name(cases):
    message = cases["loop_around_run"]["refused"]
    assert "While 'while'" in message and "replicas [0, 1]" in message and "one step per call" in message


def test_a_loop_whose_trip_count_comes_from_the_ranks_own_data_is_refused_by_name(cases):
    message = cases["data_loop"]["refused"]
    assert "While 'while'" in message and "condition is not the same on every rank" in message


def test_a_counted_loop_carrying_the_ranks_own_data_lowers(cases):
    lowered = cases["counted_loop"]["lowered"]
    assert cases["counted_loop"]["ranks"] == 2 and "While" in lowered and "HcomAllReduce" in lowered


def test_a_stack_of_the_replicas_values_is_an_all_gather(cases):
    # Keras fit's reduce_per_replica: tf.stack of the local results in replica order (graph_ir/lowering/spmd_host.py)
    assert cases["stacked"]["lowered"] == ["HcomAllGather"]
    # out of replica order it is no gather: rank 0 would need replica 1's batch, refused by name
    assert "reads argument 'x_1', which only replica 1 reads" in cases["stacked_reversed"]["refused"]


def test_a_node_reading_one_tensor_twice_keeps_both_inputs(cases):
    # tf.clip_by_global_norm's `use_norm - use_norm` (tensorflow/python/ops/clip_ops.py): x - x lowers
    assert cases["same_input_twice"]["lowered"] == ["HcomAllReduce", "HcomAllReduce"]
