"""Hostile subgraphs: files (and builder calls) whose functional ops' subgraphs are missing, duplicated, shared,
recursive, too deep, badly bound or badly typed; and loops that do not end. Each is a GraphError naming the node and
the field."""

from __future__ import annotations

import numpy as np
import pytest

import graph_ir
from graph_ir import Const, Graph, Session, Variable, ops, proto
from graph_ir.opset import control
from tests.helpers.control_graphs import functional, if_graph, nested_ifs, nested_loop, subgraph, sum_loop


def _model(graph: Graph):
    return proto.ModelDef.FromString(graph.serialize())


def _graph_def(model, name):
    return next(g for g in model.graph if g.name == name)


def _op(model, graph, name):
    return next(op for op in _graph_def(model, graph).op if op.name == name)


def _loads_error(model, match: str) -> None:
    with pytest.raises(graph_ir.GraphError, match=match):
        graph_ir.loads(model.SerializeToString())


def test_missing_and_unnamed_and_duplicate_subgraphs():
    model = _model(if_graph())
    _op(model, "if_root", "choose").subgraph_name[1] = "nowhere"
    _loads_error(model, r"node 'choose' \(If\): subgraph_name\[1\] names graph 'nowhere', which the ModelDef does not "
                        r"hold")
    model = _model(if_graph())
    _graph_def(model, "else").name = ""
    _loads_error(model, r"graph\[2\] has no name")
    model = _model(if_graph())
    model.graph.add().CopyFrom(_graph_def(model, "then"))
    _loads_error(model, r"two graphs are named 'then' \(graph\[3\] and an earlier one\)")
    model = _model(if_graph())
    _graph_def(model, "else").name = "if_root"
    _loads_error(model, r"two graphs are named 'if_root'")
    model = _model(if_graph())
    extra = model.graph.add()
    extra.CopyFrom(_graph_def(model, "then"))
    extra.name = "stray"
    _loads_error(model, r"subgraph 'stray' is not the subgraph of any node")


def test_subgraph_count_and_owner_faults():
    model = _model(if_graph())
    _op(model, "if_root", "choose").subgraph_name.append("else")
    _loads_error(model, r"subgraph 'else' is used by node 'choose' \(graph 'if_root', subgraph_name\[1\]\) and by node "
                        r"'choose' \(graph 'if_root', subgraph_name\[2\]\)")
    model = _model(if_graph())
    del _op(model, "if_root", "choose").subgraph_name[1]
    _loads_error(model, r"subgraph 'else' is not the subgraph of any node")
    model = _model(if_graph())
    del _op(model, "if_root", "choose").subgraph_name[:]
    _loads_error(model, r"not the subgraph of any node")
    model = _model(if_graph())
    model.graph.remove(_graph_def(model, "else"))
    _op(model, "if_root", "choose").subgraph_name.pop()
    _loads_error(model, r"If 'choose': needs 2 subgraphs \(then_branch, else_branch\), got 1")
    model = _model(if_graph())
    _op(model, "then", "Mul").subgraph_name.append("else")
    _loads_error(model, r"node 'Mul' \(Mul\): lists subgraph_name, but only Case, If, .* hold subgraphs")
    model = _model(if_graph())
    _op(model, "if_root", "choose").subgraph_name[0] = "if_root"
    _loads_error(model, r"subgraph_name\[0\] names the root graph 'if_root' \(recursion\)")


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
    model = _model(root)
    _op(model, "files", "two").subgraph_name[0] = "t1"
    model.graph.remove(_graph_def(model, "t2"))
    _loads_error(model, r"subgraph 't1' is used by node 'one' \(graph 'files', subgraph_name\[0\]\) and by node 'two'")


def _chain_of_loops() -> Graph:
    """root: While w1 [c1, A]; A: While w2 [c2, B]; B: While w3 [c3, C] (each body passes the state on)."""
    params = [("int32", ())]
    inner = subgraph("C", params, lambda i: [i])
    for body_name, cond_name, node_name in (("B", "c3", "w3"), ("A", "c2", "w2")):
        nested = inner

        def body(i, nested=nested, cond_name=cond_name, node_name=node_name):
            cond = subgraph(cond_name, params, lambda k: [ops.Less(k, Const(np.int32(0)))])
            graph = graph_ir.graph.default_graph()
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
    assert [int(v) for v in _run(chain, np.int32(4))] == [4]
    model = _model(chain)
    _op(model, "B", "w3").subgraph_name[1] = "A"
    model.graph.remove(_graph_def(model, "C"))
    _loads_error(model, r"subgraph 'A' is reachable from itself \(recursion\): A -> B -> A")
    model = _model(chain)  # a cycle that the root does not reach
    _op(model, "B", "w3").subgraph_name[1] = "B"
    model.graph.remove(_graph_def(model, "C"))
    _loads_error(model, r"subgraph 'B' is reachable from itself \(recursion\): B -> B")
    leaf = chain.subgraphs["C"]
    loop_cond = subgraph("c9", [("int32", ())], lambda k: [ops.Less(k, Const(np.int32(0)))])
    with leaf, pytest.raises(graph_ir.GraphError, match=r"subgraph body \('chain'\) would be nested in itself"):
        functional(leaf, "While", [leaf.node("arg0").output(0)], [loop_cond, chain])


def _run(graph: Graph, *inputs, session: Session | None = None) -> list[np.ndarray]:
    session = session or Session()
    session.add_graph(0, graph)
    return session.run_graph(0, list(inputs))


def test_nesting_deeper_than_the_bound(monkeypatch):
    data = nested_ifs(4).serialize()
    assert graph_ir.loads(data).serialize() == data
    model = proto.ModelDef.FromString(data)
    monkeypatch.setattr(control, "MAX_SUBGRAPH_DEPTH", 3)
    _loads_error(model, r"node 'If': its subgraph 't4' is nested 4 levels deep; at most 3 levels are allowed")


def test_data_index_and_binding_faults():
    model = _model(if_graph())
    _op(model, "then", "arg1").attr["index"].i = 5
    _loads_error(model, r"node 'arg1' \(Data\) in subgraph 'then' of If 'choose': attr _parent_node_index is 2, "
                        r"expected 6")
    _op(model, "then", "arg1").attr["_parent_node_index"].i = 6
    _loads_error(model, r"If 'choose': subgraph 'then' \(then_branch\): Data 'arg1' has index 5, but If passes 2 "
                        r"inputs to it \(Data indices 0..1\)")
    model = _model(if_graph())
    _op(model, "then", "arg1").attr["index"].i = 0
    _op(model, "then", "arg1").attr["_parent_node_index"].i = 1
    _loads_error(model, r"Data 'arg1' and 'arg0' both have index 0|nodes 'arg0' and 'arg1' are both fed input 0")
    model = _model(sum_loop())
    _op(model, "sum_body", "NetOutput").input_desc[1].attr["_parent_node_index"].i = 0
    _loads_error(model, r"node 'NetOutput' \(NetOutput\) in subgraph 'sum_body' of While 'loop': input_desc\[1\].attr "
                        r"_parent_node_index is 0, expected 1")
    model = _model(if_graph())
    _op(model, "if_root", "data1").attr["_parent_node_index"].i = 1
    _loads_error(model, r"node 'data1' \(Data\) has attributes the registry does not know: \['_parent_node_index'\]")
    model = _model(if_graph())
    for op in _graph_def(model, "else").op:
        if op.type == "Data":
            del op.attr["_parent_node_index"]  # GE-written files bind by it; graph_ir's index alone is enough
    assert graph_ir.loads(model.SerializeToString()).subgraphs["else"].node("arg0").attrs["index"] == 0


def test_branch_shape_and_dtype_faults():
    model = _model(if_graph())  # the else branch made consistent on float32[4] parameters
    for op in _graph_def(model, "else").op:
        for desc in (*op.input_desc, *op.output_desc):
            desc.shape.dim[0] = 4
    _loads_error(model, r"If 'choose': subgraph 'else' \(else_branch\): Data 'arg0' \(index 0\) is float32\[4\], but "
                        r"If's input 1 is float32\[5\]")
    params = [("float32", (5,))]
    then = subgraph("t", params, lambda v: [v])
    for other, says in ((subgraph("e", params, lambda v: [ops.Cast(v, dst_type="int32")]), r"int32\[5\]"),
                        (subgraph("e", [("float32", (5,))], lambda v: [ops.ReduceSum(v, Const(np.int32([0])))]),
                         r"float32\[\]"),
                        (subgraph("e", params, lambda v: [v, v]), r"float32\[5\], float32\[5\]")):
        root = Graph("typed")
        with root:
            x = graph_ir.Data(0, "float32", (5,))
            message = (rf"If 'If': subgraph 'e' \(else_branch\): returns \[{says}\], but subgraph 't' "
                       r"\(then_branch\) returns \[float32\[5\]\]")
            with pytest.raises(graph_ir.GraphError, match=message):
                functional(root, "If", [Const(np.bool_(True)), x], [then, other])
    model = _model(if_graph())
    net = _op(model, "then", "NetOutput")
    _graph_def(model, "then").op.remove(net)
    _loads_error(model, r"If 'choose': subgraph 'then' \(then_branch\): the subgraph has no NetOutput node")


def test_while_cond_and_body_faults():
    state = [("int64", ()), ("float32", (2,))]
    body = subgraph("b", state, lambda i, x: [i, x])
    for returns, says in ((lambda i, x: [ops.Less(x, Const(np.float32(1)))], r"bool\[2\]"),
                          (lambda i, x: [ops.Less(ops.Reshape(i, Const(np.int32([1]))), Const(np.int64(3)))],
                           r"bool\[1\]"),
                          (lambda i, x: [ops.Less(i, Const(np.int64(3))), i], r"bool\[\], int64\[\]")):
        root = Graph("loop")
        message = (rf"While 'While': subgraph 'c' \(cond\): must return one scalar \(shape \[\]\) of bool or a number, "
                   rf"its NetOutput has \[{says}\]")
        with root, pytest.raises(graph_ir.GraphError, match=message):
            functional(root, "While", [graph_ir.Data(0, "int64", ()), graph_ir.Data(1, "float32", (2,))],
                       [subgraph("c", state, returns), body])
    cond = subgraph("c2", state, lambda i, x: [ops.Less(i, Const(np.int64(3)))])
    wrong = subgraph("b2", state, lambda i, x: [i, ops.Cast(x, dst_type="float16")])
    root = Graph("loop")
    with root:
        with pytest.raises(graph_ir.GraphError, match=r"subgraph 'b2' \(body\): must return the loop state "
                                                      r"\[int64\[\], float32\[2\]\] \(the While's inputs' dtypes and "
                                                      r"shapes\), its NetOutput has \[int64\[\], float16\[2\]\]"):
            functional(root, "While", [graph_ir.Data(0, "int64", ()), graph_ir.Data(1, "float32", (2,))],
                       [cond, wrong])
        with pytest.raises(graph_ir.GraphError, match=r"If 'If': needs 2 subgraphs \(then_branch, else_branch\), "
                                                      r"got 0"):
            root.add_node("If", [Const(np.bool_(True))])
        with pytest.raises(graph_ir.GraphError, match=r"Mul 'Mul': takes no subgraphs, got 1"):
            root.add_node("Mul", [Const(np.float32(1)), Const(np.float32(1))], subgraphs=[Graph("x")])


def test_subgraphs_in_any_file_order_load_and_keep_that_order():
    """GE lists subgraphs in the order it added them; a file with the innermost first loads, runs and saves back in
    its own order."""
    model = _model(nested_loop())
    subgraphs = [proto.GraphDef.FromString(g.SerializeToString()) for g in model.graph[1:]]
    del model.graph[1:]
    model.graph.extend(reversed(subgraphs))
    graph = graph_ir.loads(model.SerializeToString())
    assert list(graph.subgraphs) == [g.name for g in reversed(subgraphs)]
    assert [g.name for g in proto.ModelDef.FromString(graph.serialize()).graph[1:]] == list(graph.subgraphs)
    got = _run(graph, np.int32(4), np.zeros(3, np.float32))
    assert got[0] == 4 and list(got[1]) == [-2, -2, -2]  # 0 - 1 + 2 - 3


def test_a_file_whose_cond_returns_a_non_scalar():
    state = [("int64", ()), ("bool", (1,))]
    root = Graph("flagged")
    with root:
        node = functional(root, "While", [graph_ir.Data(0, "int64", ()), graph_ir.Data(1, "bool", (1,))],
                          [subgraph("fc", state, lambda i, flag: [ops.Less(i, Const(np.int64(3)))]),
                           subgraph("fb", state, lambda i, flag: [ops.AddV2(i, Const(np.int64(1))), flag])],
                          name="flagged_loop")
        root.set_outputs([node.output(0)])
    model = _model(root)
    net = _op(model, "fc", "NetOutput")
    net.input[0] = "arg1:0"  # the cond now returns the bool[1] flag
    net.input_desc[0].shape.dim.append(1)
    _loads_error(model, r"While 'flagged_loop': subgraph 'fc' \(cond\): must return one scalar \(shape \[\]\) of bool "
                        r"or a number, its NetOutput has \[bool\[1\]\]")


def test_a_loop_past_max_loop_iterations_names_the_node_and_keeps_what_ran():
    """The rule for Variables: nothing is rolled back; the bodies that ran before the error have written them."""
    params = [("float32", ())]

    def body(x):
        ticks = Variable("ticks", np.int32(0))
        done = ops.AssignAdd(ticks, Const(np.int32(1)))
        return [ops.Identity(x, control_inputs=[done])]

    root = Graph("forever")
    with root:
        node = functional(root, "While", [graph_ir.Data(0, "float32", ())],
                          [subgraph("spin_cond", params, lambda x: [x]), subgraph("spin_body", params, body)],
                          name="spin")
        root.set_outputs([node.output(0)])
    session = Session(max_loop_iterations=50)
    session.add_graph(0, root)
    with pytest.raises(graph_ir.GraphError, match=r"While 'spin': its cond 'spin_cond' still holds after 50 "
                                                  r"iterations, and this run has executed 50 loop bodies \(all While "
                                                  r"nodes together\), this session's max_loop_iterations"):
        session.run_graph(0, [np.float32(np.nan)])  # NaN is true, forever
    assert session.get_variables(["ticks"])[0] == 50
    assert session.run_graph(0, [np.float32(0)])[0] == 0
    assert session.get_variables(["ticks"])[0] == 50
    with pytest.raises(TypeError, match="max_loop_iterations must be an int >= 0"):
        Session(max_loop_iterations=-1)


def test_the_loop_budget_is_per_run_and_shared_by_all_loops():
    """Two loops of 30 bodies each: a budget of 60 runs both, every run anew; 59 stops the second one."""
    params = [("int64", ())] * 3
    root = Graph("two_loops")
    with root:
        n = graph_ir.Data(0, "int64", ())
        results = []
        for name in ("first", "second"):
            cond = subgraph("sum_cond", params, lambda i, total, n: [ops.LessEqual(i, n)])
            body = subgraph("sum_body", params, lambda i, total, n: [ops.AddV2(i, Const(np.int64(1))),
                                                                     ops.AddV2(total, i), n])
            results.append(functional(root, "While", [Const(np.int64(1)), Const(np.int64(0)), n], [cond, body],
                                      name=f"loop_{name}").output(1))
        root.set_outputs(results)
    session = Session(max_loop_iterations=60)
    session.add_graph(0, root)
    for _ in range(2):
        assert [int(v) for v in session.run_graph(0, [np.int64(30)])] == [465, 465]
    session = Session(max_loop_iterations=59)
    session.add_graph(0, root)
    with pytest.raises(graph_ir.GraphError, match=r"While 'loop_second': its cond 'sum_cond_1' still holds after 29 "
                                                  r"iterations, and this run has executed 59 loop bodies"):
        session.run_graph(0, [np.int64(30)])


def test_refdata_in_a_subgraph_is_refused():
    params = [("float32", ())]
    odd = Graph("odd")
    with odd:
        odd.set_outputs([graph_ir.Data(0, "float32", (), ref=True)])
    root = Graph("r")
    message = r"subgraph 'odd' \(then_branch\): node 'refdata0' is a RefData"
    with root, pytest.raises(graph_ir.GraphError, match=message):
        functional(root, "If", [Const(np.bool_(True)), graph_ir.Data(0, "float32", ())],
                   [odd, subgraph("fine", params, lambda v: [v])])


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
    base = _model(nested_loop())
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
            _run(graph, np.int32(3), np.ones(3, np.float32))
        except (graph_ir.GraphError, TypeError, ValueError):
            pass
        assert graph_ir.loads(graph.serialize()).serialize() == graph.serialize()
    assert 0 < loaded < 300
