"""The Hcom prototypes (graph_ir/opset/hcom.py): output descs per hcom_ops.h and the TF adapter's shape functions,
and clear GraphErrors for bad attributes and shapes, in one process (no MPI needed)."""

from __future__ import annotations

import pytest

import graph_ir
from graph_ir import ops
from graph_ir.ir.errors import GraphError
from graph_ir.ir.graph import default_graph
from graph_ir.opset.hcom import WORLD_GROUP

W = WORLD_GROUP


def _out(build, shape=(4, 3), dtype="float32"):
    graph = graph_ir.Graph("g")
    with graph:
        x = graph_ir.Data(0, dtype, shape, name="x")
        y = build(x)
    return y


def test_all_reduce_keeps_the_desc_and_default_fusion():
    y = _out(lambda x: ops.HcomAllReduce(x, reduction="sum", group=W, name="ar"))
    assert (y.dtype.name, y.shape) == ("float32", (4, 3))
    assert y.node.attrs["fusion"] == 1 and y.node.attrs["fusion_id"] == -1


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_all_gather_and_reduce_scatter_shapes(ranks):
    y = _out(lambda x: ops.HcomAllGather(x, rank_size=ranks, group=W), shape=(2, 5), dtype="int64")
    assert (y.dtype.name, y.shape) == ("int64", (2 * ranks, 5))
    y = _out(lambda x: ops.HcomReduceScatter(x, reduction="max", group=W, rank_size=ranks), shape=(8, 5))
    assert y.shape == (8 // ranks, 5)


def test_broadcast_is_a_list_of_the_same_descs():
    graph = graph_ir.Graph("g")
    with graph:
        a = graph_ir.Data(0, "float32", (2, 2), name="a")
        b = graph_ir.Data(1, "int32", (3,), name="b")
        ya, yb = ops.HcomBroadcast([a, b], root_rank=0, group=W)
    assert [(h.dtype.name, h.shape) for h in (ya, yb)] == [("float32", (2, 2)), ("int32", (3,))]
    assert ya.node.attrs["fusion"] == 0


def test_reduce_has_root_and_reduction():
    y = _out(lambda x: ops.HcomReduce(x, root_rank=1, reduction="prod", group=W), dtype="int16")
    assert (y.dtype.name, y.shape) == ("int16", (4, 3))


@pytest.mark.parametrize("build, match", [
    (lambda x: ops.HcomReduceScatter(x, reduction="sum", group=W, rank_size=3), r"dim 0 \(4\) must be a multiple"),
    (lambda x: ops.HcomAllReduce(x, reduction="mean", group=W), r"'reduction' must be one of sum, prod, max, min"),
    (lambda x: ops.HcomAllReduce(x, reduction="sum", group=""), r"'group' must be a name of 1 to 128"),
    (lambda x: ops.HcomAllReduce(x, reduction="sum", group="g" * 129), r"'group' must be a name of 1 to 128"),
    (lambda x: ops.HcomAllReduce(x, reduction="sum", group=W, fusion=3), r"'fusion' must be 0"),
    (lambda x: ops.HcomAllGather(x, rank_size=0, group=W), r"'rank_size' must be an int >= 1"),
    (lambda x: default_graph().add_node("HcomAllReduce", [x], {"group": W}, name="ar"),
     r"HcomAllReduce 'ar': required attribute 'reduction'"),
])
def test_refusals_name_the_node(build, match):
    with pytest.raises(GraphError, match=match):
        _out(build)


def test_dtypes_per_reg_op():
    with pytest.raises(GraphError, match="int64"):
        _out(lambda x: ops.HcomAllReduce(x, reduction="sum", group=W), dtype="int64")
    with pytest.raises(GraphError, match="bfloat16"):
        _out(lambda x: ops.HcomAllGather(x, rank_size=2, group=W), dtype="bfloat16")
    with pytest.raises(GraphError, match="scalar"):
        _out(lambda x: ops.HcomAllGather(x, rank_size=2, group=W), shape=())
