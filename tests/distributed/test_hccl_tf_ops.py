"""tf_plugin.hccl: Ascend's TF adapter collectives (HcomAllReduce, HcomAllGather, HcomBroadcast, HcomReduceScatter,
hicann/tensorflow tf_adapter/ops/hccl/hccl_ops.cc) as TF ops with CPU kernels on graph_ir/distributed's MPI engine.

In this process (no MPI started): the ops' registrations (names, inputs, attributes and type lists as the adapter's),
their shape functions, the wrappers' signatures (npu_bridge.hccl.hccl_ops's), the refusal without a group, and the
1:1 lowering (graph_ir.from_tensorflow: GE nodes of the same type and attributes). As a 2-rank MPI job
(tests/helpers/hccl_tf_ranks.py): every collective against NumPy, bitwise, the collectives of one tf.function chained
in program order, the allreduce gradient, and the refusals naming the op and the attribute; ranks issuing different
collectives, and a rank that left, fail naming the ranks (slow). The ported training script against
MirroredStrategy and its lowering under graph_ir.Session: tests/distributed/test_hccl_tf_training.py.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from tests.helpers import ROOT, hccl_tf_ranks
from tests.helpers.mpi import run_ranks
from tf_plugin import _loader
from tf_plugin.hccl import engine, hccl_ops

TESTED = ("HcomAllReduce", "HcomAllGather", "HcomBroadcast", "HcomReduceScatter")  # test_family_ops.py PER_OP_TESTS
W = "hccl_world_group"


def test_the_registrations_are_the_adapters():
    """Names, input and output names, attributes without defaults, type lists: hccl_ops.cc's REG_OPs."""
    from tensorflow.python.framework import op_def_registry

    _loader.load()
    attrs = {"HcomAllReduce": ["T", "reduction", "group", "fusion", "fusion_id"],
             "HcomAllGather": ["T", "group", "fusion", "fusion_id", "rank_size"],
             "HcomBroadcast": ["T", "fusion", "fusion_id", "group", "root_rank"],
             "HcomReduceScatter": ["T", "reduction", "group", "fusion", "fusion_id", "rank_size"]}
    for name, names in attrs.items():
        op_def = op_def_registry.get(name)
        assert [a.name for a in op_def.attr] == names, name
        assert [a.name for a in op_def.input_arg] == ["input"] and [a.name for a in op_def.output_arg] == ["output"]
        assert op_def.is_stateful and not any(a.HasField("default_value") for a in op_def.attr), name
    reduce_types = [tf.as_dtype(t).name for t in op_def_registry.get("HcomAllReduce").attr[0].allowed_values.list.type]
    assert reduce_types == ["int8", "int16", "int32", "int64", "float16", "float32", "bfloat16"]
    assert op_def_registry.get("HcomBroadcast").input_arg[0].type_list_attr == "T"
    assert list(op_def_registry.get("HcomAllReduce").attr[1].allowed_values.list.s) == [b"min", b"max", b"prod", b"sum"]


def test_the_wrappers_have_npu_bridges_signatures():
    def sig(fn):
        return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]

    e = inspect.Parameter.empty
    assert sig(hccl_ops.allreduce) == [("tensor", e), ("reduction", e), ("fusion", 1), ("fusion_id", -1), ("group", W)]
    assert sig(hccl_ops.allgather) == [("tensor", e), ("rank_size", e), ("group", W), ("fusion", 0), ("fusion_id", -1)]
    assert sig(hccl_ops.broadcast) == [("tensor", e), ("root_rank", e), ("fusion", 2), ("fusion_id", 0), ("group", W)]
    assert sig(hccl_ops.reduce_scatter) == [("tensor", e), ("reduction", e), ("rank_size", e), ("group", W),
                                            ("fusion", 0), ("fusion_id", -1)]


def test_shape_functions():
    def shapes(fn, *specs):
        return [t.shape.as_list() for t in tf.nest.flatten(tf.function(fn).get_concrete_function(*specs).outputs)]

    spec = tf.TensorSpec([6, 5, 3])
    assert shapes(lambda x: hccl_ops.allgather(x, 2), spec) == [[12, 5, 3]]
    assert shapes(lambda x: hccl_ops.reduce_scatter(x, "sum", 3), spec) == [[2, 5, 3]]
    assert shapes(lambda x: hccl_ops.allgather(x, 2), tf.TensorSpec([None, 4])) == [[None, 4]]
    assert shapes(lambda x: hccl_ops.allreduce(x, "min"), spec) == [[6, 5, 3]]
    assert shapes(lambda x, y: hccl_ops.broadcast([x, y], 0), spec, tf.TensorSpec([2], tf.int32)) == [[6, 5, 3], [2]]
    with pytest.raises(ValueError, match=r"HcomReduceScatter: input's dim 0 \(6\) must be a multiple of attribute "
                                         r"'rank_size' \(4\)"):
        shapes(lambda x: hccl_ops.reduce_scatter(x, "sum", 4), spec)
    with pytest.raises(ValueError, match=r"HcomAllGather: attribute 'rank_size' must be > 0 .*got 0"):
        shapes(lambda x: hccl_ops.allgather(x, 0), spec)
    with pytest.raises(ValueError, match=r"Shape must be at least rank 1 but is rank 0"):
        shapes(lambda x: hccl_ops.allgather(x, 2), tf.TensorSpec([]))


def test_without_a_group_the_kernel_names_the_op(monkeypatch):
    def no_mpi(timeout=None):
        raise ImportError("graph_ir.distributed needs mpi4py and an MPI runtime: pip install mpi4py mpich")

    monkeypatch.setattr(engine, "world", no_mpi)
    with pytest.raises(tf.errors.FailedPreconditionError, match=r"HcomAllReduce 'HcomAllReduce': the TF collective "
                                                                r"needs an MPI group and there is none: .*mpi4py"):
        hccl_ops.allreduce(tf.ones([2]), "sum")


def test_the_ops_lower_one_to_one():
    """from_tensorflow: each TF op becomes the GE op of the same type and attributes, in the same order."""

    @tf.function
    def step(x, y):
        a = hccl_ops.allreduce(x, "max", fusion=2, fusion_id=7)
        b = hccl_ops.allgather(x * 2, 2)
        c = hccl_ops.broadcast([x, y], root_rank=1)
        d = hccl_ops.reduce_scatter(x, "prod", 2)
        return a, b, c, d

    specs = (tf.TensorSpec([4, 3]), tf.TensorSpec([5], tf.int32))
    graph = graph_ir.from_tensorflow(step, *specs)
    tf_ops = [op for op in step.get_concrete_function(*specs).graph.get_operations() if op.type.startswith("Hcom")]
    ge = [n for n in graph.topological_order() if n.type.startswith("Hcom")]
    assert [n.type for n in ge] == [op.type for op in tf_ops] == list(TESTED)
    for node, op in zip(ge, tf_ops):
        want = {a: op.get_attr(a) for a in node.attrs}
        assert node.attrs == {k: v.decode() if isinstance(v, bytes) else v for k, v in want.items()}, node.type
        assert set(node.attrs) == {a.name for a in op.op_def.attr} - {"T"}
    assert [d.shape for d in ge[1].output_descs] == [(8, 3)] and [d.shape for d in ge[3].output_descs] == [(2, 3)]
    assert [d.dtype.name for d in ge[2].output_descs] == ["float32", "int32"]


def test_every_collective_on_two_ranks_matches_numpy(tmp_path):
    run_ranks(2, "tests.helpers.hccl_tf_ranks", "values", str(tmp_path), timeout=120, hcom_timeout=60)
    results = []
    for r in range(2):
        with np.load(tmp_path / f"rank{r}.npz") as npz:
            got = {k: npz[k] for k in npz.files}
        want = hccl_tf_ranks.expected(2, r)
        assert sorted(got) == sorted(want)
        for name, value in want.items():
            assert got[name].dtype == value.dtype and got[name].shape == value.shape, (r, name)
            assert got[name].tobytes() == value.tobytes(), (r, name, got[name], value)  # the documented order
        results.append(got)
        report = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert report["chained"] and report["collectives"] == len(hccl_tf_ranks.CASES) + 1
        errors = report["errors"]
        assert "HcomAllGather 'HcomAllGather': attribute 'rank_size' is 3, but group 'hccl_world_group' has 2 " \
               "ranks" in errors["rank_size"]
        assert errors["reduction"].startswith("ValueError: HcomAllReduce: reduction must be one of sum, prod, max, "
                                              "min") and "got 'mean'" in errors["reduction"]
        assert "HcomAllReduce 'HcomAllReduce': attribute 'T' is bfloat16, but GE's HcomAllReduce (CANN " \
               "hcom_ops.h) takes float32, int32, int8, int16, float16" in errors["dtype_ge"]
        assert "Value for attr 'T' of double is not in the list of allowed values" in errors["dtype_tf"]
        assert "HcomAllReduce" in errors["dtype_tf"]
        assert "HcomBroadcast 'HcomBroadcast': attribute 'root_rank' is 2, but group 'hccl_world_group' has ranks 0 " \
               "to 1" in errors["root_rank"]
        assert "HcomReduceScatter 'HcomReduceScatter': input's dim 0 (3) must be a multiple of attribute " \
               "'rank_size' (2)" in errors["dim0"]
    assert results[0]["grad"].tobytes() != results[1]["grad"].tobytes()  # each rank its own x's gradient
    shared = [c[0] for c in hccl_tf_ranks.CASES if c[1] != "reduce_scatter"] + ["eager", "bc_0", "bc_1", "bc_2"]
    assert all(results[0][n].tobytes() == results[1][n].tobytes() for n in shared)


def test_the_gradient_is_the_adapters():
    """d/dx sum(allreduce(x)): allreduce(dy, "sum", fusion=0), in the same group."""

    @tf.function
    def grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = hccl_ops.allreduce(x * x, "max")
        return tape.gradient(y, x)

    ops = [op for op in grad.get_concrete_function(tf.TensorSpec([3])).graph.get_operations()
           if op.type == "HcomAllReduce"]
    assert [(op.get_attr("reduction"), op.get_attr("fusion"), op.get_attr("fusion_id")) for op in ops] == \
        [(b"max", 1, -1), (b"sum", 0, -1)]
    assert ops[0] in ops[1].control_inputs  # chained in program order, the gradient after the forward collective


def test_without_the_engine_the_kernel_names_the_op():
    """A process that loads the ops (import tf_plugin) but never imports tf_plugin.hccl."""
    code = ("import tensorflow as tf, tf_plugin\n"
            "try:\n"
            "    tf_plugin.op_library.hcom_all_reduce(input=tf.ones([2]), reduction='sum', group='hccl_world_group',"
            " fusion=0, fusion_id=-1)\n"
            "except tf.errors.FailedPreconditionError as e:\n"
            "    print(e.message)\n")
    env = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    assert "HcomAllReduce 'HcomAllReduce': no collective engine is registered in this process: import " \
           "tf_plugin.hccl" in done.stdout, done.stdout + done.stderr[-2000:]


@pytest.mark.slow
def test_ranks_issuing_different_collectives_fail_naming_the_ranks(tmp_path):
    """Each rank finds the mismatch by itself; its group is then broken (the collective posted beside the check is
    unmatched), so the job ends in MPI_Abort."""
    job = run_ranks(2, "tests.helpers.hccl_tf_ranks", "mismatch", str(tmp_path), timeout=120, hcom_timeout=20,
                    check=False)
    assert job.returncode != 0 and "MPI_Abort" in job.stderr, job.stderr
    errors = [(tmp_path / f"rank{r}.txt").read_text() for r in range(2)]
    assert errors[0].startswith("AbortedError: ") and "rank 0: HcomAllReduce 'HcomAllReduce' (" in errors[0]
    assert "ranks [1] issue another collective" in errors[0] and '"reduction": "sum"' in errors[0]
    assert "rank 1: HcomAllReduce 'HcomAllReduce'" in errors[1] and "ranks [0] issue another collective" in errors[1]


@pytest.mark.slow
def test_a_rank_that_left_fails_the_other_within_the_timeout(tmp_path):
    start = time.monotonic()
    done = run_ranks(2, "tests.helpers.hccl_tf_ranks", "early_exit", str(tmp_path), timeout=90, hcom_timeout=3,
                     check=False)
    assert done.returncode != 0 and not (tmp_path / "rank1.txt").exists()
    error = (tmp_path / "rank0.txt").read_text()
    assert re.search(r"DeadlineExceededError: .*rank 0: HcomAllReduce 'HcomAllReduce' \(checking the ranks' "
                     r"collectives agree\) did not complete within 3 s .*ranks not heard from \(exited, stuck, or "
                     r"still computing\): \[1\]", error), done.stdout + done.stderr[-3000:]
    assert time.monotonic() - start < 60
