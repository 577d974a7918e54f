"""A Session's group, in one process (no MPI started): the argument checked, Hcom nodes refused without a group, a
graph's Hcom nodes checked against the group before any exchange, the timeout's sources, the join signature."""

from __future__ import annotations

import pytest

import graph_ir
from graph_ir import ops
from graph_ir.distributed import group as group_module
from graph_ir.distributed.group import Group, check_timeout, default_timeout
from graph_ir.distributed.runs import hcom_nodes, join, signature

W = "hccl_world_group"


class _Comm:
    """Rank 1 of 2: what a Group reads of its communicator before any collective."""

    def Get_rank(self) -> int:  # mpi4py's spelling
        return 1

    def Get_size(self) -> int:
        return 2


def _graph(**attrs):
    graph = graph_ir.Graph("g")
    with graph:
        x = graph_ir.Data(0, "float32", (4, 2), name="x")
        y = ops.Relu(x, name="relu")
        a = ops.HcomAllReduce(y, reduction="sum", group=attrs.get("group", W), name="ar")
        b = ops.HcomAllGather(a, rank_size=attrs.get("rank_size", 2), group=W, name="ag")
        c = ops.HcomBroadcast([b], root_rank=attrs.get("root_rank", 0), group=W, name="bc")
        graph.set_outputs([c])
    return graph


def test_the_group_argument_is_checked():
    with pytest.raises(TypeError, match="group must be a graph_ir.distributed.Group or None, got str"):
        graph_ir.Session(group=W)


def test_a_session_without_a_group_refuses_hcom_nodes_by_name():
    session = graph_ir.Session()
    with pytest.raises(graph_ir.GraphError, match=r"HcomAllReduce 'ar': this Session has no group: make it with "
                                                  r"graph_ir.Session\(group=graph_ir.distributed.world\(\)\)"):
        session.add_graph(0, _graph())
    assert session.get_variables([]) == []  # nothing was added


def test_a_graph_without_hcom_nodes_needs_no_group():
    graph = graph_ir.Graph("plain")
    with graph:
        graph.set_outputs([ops.Relu(graph_ir.Data(0, "float32", (2,), name="x"))])
    assert join(None, graph) is None


def test_hcom_nodes_in_run_order_and_their_signature():
    nodes = hcom_nodes(_graph())
    assert [n.name for n in nodes] == ["ar", "ag", "bc"]
    assert signature(nodes[0]) == {"type": "HcomAllReduce", "group": W, "reduction": "sum", "fusion": 1,
                                   "fusion_id": -1, "inputs": ["float32[4, 2]"]}
    assert signature(nodes[1])["inputs"] == ["float32[4, 2]"] and signature(nodes[1])["rank_size"] == 2
    assert signature(nodes[2])["root_rank"] == 0 and signature(nodes[2])["inputs"] == ["float32[8, 2]"]


@pytest.mark.parametrize("attrs, match", [
    ({"group": "other"}, (r"rank 1: graph 'g': HcomAllReduce 'ar': attribute 'group' is 'other'; this session's "
                         r"group is 'hccl_world_group'")),
    ({"rank_size": 4}, r"HcomAllGather 'ag': attribute 'rank_size' is 4, but group 'hccl_world_group' has 2 ranks"),
    ({"root_rank": 2}, r"HcomBroadcast 'bc': root_rank 2 is not a rank of group 'hccl_world_group' \(2 ranks\)"),
])
def test_nodes_that_do_not_fit_the_group_are_refused_before_any_exchange(attrs, match):
    group = Group(_Comm(), timeout=5)  # a collective on this fake communicator would fail: none is reached
    with pytest.raises(graph_ir.GraphError, match=match):
        join(group, _graph(**attrs))
    assert group.sequence == 0


def test_the_timeout_comes_from_the_argument_the_environment_or_the_default(monkeypatch):
    monkeypatch.delenv(group_module.TIMEOUT_ENV, raising=False)
    assert default_timeout() == 120.0 and check_timeout(None) == 120.0 and check_timeout(2) == 2.0
    monkeypatch.setenv(group_module.TIMEOUT_ENV, "7.5")
    assert Group(_Comm()).timeout == 7.5 and Group(_Comm(), timeout=1).timeout == 1.0
    for bad in ("0", "-1", "soon"):
        monkeypatch.setenv(group_module.TIMEOUT_ENV, bad)
        with pytest.raises(ValueError, match="GRAPH_IR_HCOM_TIMEOUT must be a number of seconds > 0"):
            default_timeout()
    for bad in (0, -3, True, "5"):
        with pytest.raises(TypeError, match="timeout must be a number of seconds > 0"):
            check_timeout(bad)
    assert repr(Group(_Comm(), timeout=3)) == "Group('hccl_world_group', rank 1 of 2, timeout 3 s)"
