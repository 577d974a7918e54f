"""Hostile subgraphs, their structure: files (and builder calls) whose functional ops' subgraphs are missing,
unnamed, duplicated, miscounted, shared by two parents, recursive or too deep, in any file order, or randomly
edited. Each is a GraphError naming the node and the field. Badly bound or typed subgraphs and loops that do not
end: tests/graph_ir/test_hostile_subgraph_bindings.py."""

from __future__ import annotations

import numpy as np
import pytest

import graph_ir
from graph_ir import Const, Graph, ops, proto
from graph_ir.opset import control
from tests.helpers.control_graphs import functional, if_graph, nested_ifs, nested_loop, run, subgraph
from tests.helpers.hostile_graphs import assert_loads_error, graph_def_named, model_def, op_named


def test_missing_and_unnamed_and_duplicate_subgraphs():
    model = model_def(if_graph())
    op_named(model, "if_root", "choose").subgraph_name[1] = "nowhere"
    assert_loads_error(model, r"node 'choose' \(If\): subgraph_name\[1\] names graph 'nowhere', which the ModelDef does not "
                        r"hold")
    model = model_def(if_graph())
    graph_def_named(model, "else").name = ""
    assert_loads_error(model, r"graph\[2\] has no name")
    model = model_def(if_graph())
    model.graph.add().CopyFrom(graph_def_named(model, "then"))
    assert_loads_error(model, r"two graphs are named 'then' \(graph\[3\] and an earlier one\)")
    model = model_def(if_graph())
    graph_def_named(model, "else").name = "if_root"
    assert_loads_error(model, r"two graphs are named 'if_root'")
    model = model_def(if_graph())
    extra = model.graph.add()
    extra.CopyFrom(graph_def_named(model, "then"))
    extra.name = "stray"
    assert_loads_error(model, r"subgraph 'stray' is not the subgraph of any node")


def test_subgraph_count_and_owner_faults():
    model = model_def(if_graph())
    op_named(model, "if_root", "choose").subgraph_name.append("else")
    assert_loads_error(model, r"subgraph 'else' is used by node 'choose' \(graph 'if_root', subgraph_name\[1\]\) and by node "
                        r"'choose' \(graph 'if_root', subgraph_name\[2\]\)")
    model = model_def(if_graph())
    del op_named(model, "if_root", "choose").subgraph_name[1]
    assert_loads_error(model, r"subgraph 'else' is not the subgraph of any node")
    model = model_def(if_graph())
    del op_named(model, "if_root", "choose").subgraph_name[:]
    assert_loads_error(model, r"not the subgraph of any node")
    model = model_def(if_graph())
    model.graph.remove(graph_def_named(model, "else"))
    op_named(model, "if_root", "choose").subgraph_name.pop()
    assert_loads_error(model, r"If 'choose': needs 2 subgraphs \(then_branch, else_branch\), got 1")
    model = model_def(if_graph())
    op_named(model, "then", "Mul").subgraph_name.append("else")
    assert_loads_error(model, r"node 'Mul' \(Mul\): lists subgraph_name, but only Case, If, .* hold subgraphs")
    model = model_def(if_graph())
    op_named(model, "if_root", "choose").subgraph_name[0] = "if_root"
    assert_loads_error(model, r"subgraph_name\[0\] names the root graph 'if_root' \(recursion\)")


def test_a_subgraph_used_by_two_parents():
    params = [("float32", ())]
    shared = subgraph("shared", params, lambda v: [v])
    root = Graph("two_parents")
    with root:
        x = graph_ir.Data(0, "float32", ())
        functional(root, "If", [Const(np.bool_(True)), x], [shared, subgraph("a", params, lambda v: [v])], name="one")
        with pytest.raises(graph_ir.GraphError, match=r"If 'two': subgraph then_branch \('shared'\) is already the "
                                                      r"subgraph of node 'one' in graph 'two_parents'"):
            functional(root, "If", [Const(np.bool_(True)), x], [shared, subgraph("b", params, lambda v: [v])],
                       name="two")
        other = subgraph("c", params, lambda v: [v])
        with pytest.raises(graph_ir.GraphError, match=r"subgraph else_branch \('c'\) would be nested in itself "
                                                      r"\(recursion\) or given twice"):
            functional(root, "If", [Const(np.bool_(True)), x], [other, other], name="twice")
    # In a file: the second If names the first one's then-branch.
    root = Graph("files")
    with root:
        x = graph_ir.Data(0, "float32", ())
        first = functional(root, "If", [Const(np.bool_(True)), x], [subgraph("t1", params, lambda v: [v]),
                                                                  subgraph("e1", params, lambda v: [v])], name="one")
        second = functional(root, "If", [Const(np.bool_(True)), x], [subgraph("t2", params, lambda v: [v]),
                                                                   subgraph("e2", params, lambda v: [v])], name="two")
        root.set_outputs([first.output(0), second.output(0)])
    model = model_def(root)
    op_named(model, "files", "two").subgraph_name[0] = "t1"
    model.graph.remove(graph_def_named(model, "t2"))
    assert_loads_error(model, r"subgraph 't1' is used by node 'one' \(graph 'files', subgraph_name\[0\]\) and by node 'two'")


def _chain_of_loops() -> Graph:
    """root: While w1 [c1, A]; A: While w2 [c2, B]; B: While w3 [c3, C] (each body passes the state on)."""
    params = [("int32", ())]
    inner = subgraph("C", params, lambda i: [i])
    for body_name, cond_name, node_name in (("B", "c3", "w3"), ("A", "c2", "w2")):
        nested = inner

        def body(i, nested=nested, cond_name=cond_name, node_name=node_name):
            cond = subgraph(cond_name, params, lambda k: [ops.Less(k, Const(np.int32(0)))])
            graph = graph_ir.ir.graph.default_graph()
            return [functional(graph, "While", [i], [cond, nested], name=node_name).output(0)]

        inner = subgraph(body_name, params, body)
    root = Graph("chain")
    with root:
        cond = subgraph("c1", params, lambda k: [ops.Less(k, Const(np.int32(0)))])
        node = functional(root, "While", [graph_ir.Data(0, "int32", ())], [cond, inner], name="w1")
        root.set_outputs([node.output(0)])
    return root


def test_recursion_through_subgraphs():
    """A's body holds a While whose body holds a While whose body is A again."""
    chain = _chain_of_loops()
    assert [int(v) for v in run(chain, np.int32(4))] == [4]
    model = model_def(chain)
    op_named(model, "B", "w3").subgraph_name[1] = "A"
    model.graph.remove(graph_def_named(model, "C"))
    assert_loads_error(model, r"subgraph 'A' is reachable from itself \(recursion\): A -> B -> A")
    model = model_def(chain)  # a cycle that the root does not reach
    op_named(model, "B", "w3").subgraph_name[1] = "B"
    model.graph.remove(graph_def_named(model, "C"))
    assert_loads_error(model, r"subgraph 'B' is reachable from itself \(recursion\): B -> B")
    leaf = chain.subgraphs["C"]
    loop_cond = subgraph("c9", [("int32", ())], lambda k: [ops.Less(k, Const(np.int32(0)))])
    with leaf, pytest.raises(graph_ir.GraphError, match=r"subgraph body \('chain'\) would be nested in itself"):
        functional(leaf, "While", [leaf.node("arg0").output(0)], [loop_cond, chain])


def test_nesting_deeper_than_the_bound(monkeypatch):
    data = nested_ifs(4).serialize()
    assert graph_ir.loads(data).serialize() == data
    model = proto.ModelDef.FromString(data)
    monkeypatch.setattr(control, "MAX_SUBGRAPH_DEPTH", 3)
    assert_loads_error(model, r"node 'If': its subgraph 't4' is nested 4 levels deep; at most 3 levels are allowed")


def test_subgraphs_in_any_file_order_load_and_keep_that_order():
    """GE lists subgraphs in the order it added them; a file with the innermost first loads, runs and saves back in
    its own order."""
    model = model_def(nested_loop())
    subgraphs = [proto.GraphDef.FromString(g.SerializeToString()) for g in model.graph[1:]]
    del model.graph[1:]
    model.graph.extend(reversed(subgraphs))
    graph = graph_ir.loads(model.SerializeToString())
    assert list(graph.subgraphs) == [g.name for g in reversed(subgraphs)]
    assert [g.name for g in proto.ModelDef.FromString(graph.serialize()).graph[1:]] == list(graph.subgraphs)
    got = run(graph, np.int32(4), np.zeros(3, np.float32))
    assert got[0] == 4 and list(got[1]) == [-2, -2, -2]  # 0 - 1 + 2 - 3


def _mutate(model, rng) -> None:
    """One random edit of the subgraph structure or of a node inside a subgraph."""
    names = [g.name for g in model.graph]
    holders = [op for g in model.graph for op in g.op if op.subgraph_name]
    inner = [op for g in model.graph[1:] for op in g.op]
    op = holders[rng.integers(len(holders))]
    victim = inner[rng.integers(len(inner))]
    kind = rng.integers(8)
    if kind == 0:
        op.subgraph_name[rng.integers(len(op.subgraph_name))] = names[rng.integers(len(names))]
    elif kind == 1:
        op.subgraph_name.reverse()
    elif kind == 2:
        model.graph[int(rng.integers(1, len(model.graph)))].name = names[rng.integers(len(names))]
    elif kind == 3:
        del model.graph[int(rng.integers(len(model.graph)))]
    elif kind == 4:
        victim.type = str(rng.choice(["If", "While", "Case", "StatelessWhile", "Data", "NetOutput"]))
    elif kind == 5 and "index" in victim.attr:
        victim.attr["index"].i = int(rng.choice([-1, 1, 2, 3, 2**40]))
    elif kind == 6 and victim.output_desc:
        desc = victim.output_desc[0]
        desc.shape.dim.append(int(rng.choice([0, 1, 2, 3])))
    else:
        victim.subgraph_name.append(names[rng.integers(len(names))])


def test_random_subgraph_edits_raise_only_graph_errors():
    """Loading raises only GraphError; what loads also adds, runs (GraphError, TypeError or ValueError at most) and
    saves again."""
    base = model_def(nested_loop())
    rng = np.random.default_rng(7)
    loaded = 0
    for _ in range(300):
        model = proto.ModelDef()
        model.CopyFrom(base)
        for _ in range(rng.integers(1, 3)):
            _mutate(model, rng)
        try:
            graph = graph_ir.loads(model.SerializeToString())
        except graph_ir.GraphError:
            continue
        loaded += 1
        try:
            run(graph, np.int32(3), np.ones(3, np.float32))
        except (graph_ir.GraphError, TypeError, ValueError):
            pass
        assert graph_ir.loads(graph.serialize()).serialize() == graph.serialize()
    assert 0 < loaded < 300
