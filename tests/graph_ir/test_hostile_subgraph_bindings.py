"""Hostile subgraphs, their bindings: files (and builder calls) whose subgraphs are badly bound (Data indices,
RefData) or badly typed (branch shapes and dtypes, a While's cond and body, a cond returning a non-scalar); and loops
that do not end (the loop budget, per run and shared by all loops). Each is a GraphError naming the node and the
field. The subgraphs' structure: tests/graph_ir/test_hostile_subgraphs.py."""

from __future__ import annotations

import numpy as np
import pytest

import graph_ir
from graph_ir import Const, Graph, Session, Variable, ops
from tests.helpers.control_graphs import functional, if_graph, subgraph, sum_loop
from tests.helpers.hostile_graphs import assert_loads_error, graph_def_named, model_def, op_named


def test_data_index_and_binding_faults():
    model = model_def(if_graph())
    op_named(model, "then", "arg1").attr["index"].i = 5
    assert_loads_error(model, r"node 'arg1' \(Data\) in subgraph 'then' of If 'choose': attr _parent_node_index is 2, "
                        r"expected 6")
    op_named(model, "then", "arg1").attr["_parent_node_index"].i = 6
    assert_loads_error(model, r"If 'choose': subgraph 'then' \(then_branch\): Data 'arg1' has index 5, but If passes 2 "
                        r"inputs to it \(Data indices 0..1\)")
    model = model_def(if_graph())
    op_named(model, "then", "arg1").attr["index"].i = 0
    op_named(model, "then", "arg1").attr["_parent_node_index"].i = 1
    assert_loads_error(model, r"Data 'arg1' and 'arg0' both have index 0|nodes 'arg0' and 'arg1' are both fed input 0")
    model = model_def(sum_loop())
    op_named(model, "sum_body", "NetOutput").input_desc[1].attr["_parent_node_index"].i = 0
    assert_loads_error(model, r"node 'NetOutput' \(NetOutput\) in subgraph 'sum_body' of While 'loop': input_desc\[1\].attr "
                        r"_parent_node_index is 0, expected 1")
    model = model_def(if_graph())
    op_named(model, "if_root", "data1").attr["_parent_node_index"].i = 1
    assert_loads_error(model, r"node 'data1' \(Data\) has attributes the registry does not know: \['_parent_node_index'\]")
    model = model_def(if_graph())
    for op in graph_def_named(model, "else").op:
        if op.type == "Data":
            del op.attr["_parent_node_index"]  # GE-written files bind by it; graph_ir's index alone is enough
    assert graph_ir.loads(model.SerializeToString()).subgraphs["else"].node("arg0").attrs["index"] == 0


def test_branch_shape_and_dtype_faults():
    model = model_def(if_graph())  # the else branch made consistent on float32[4] parameters
    for op in graph_def_named(model, "else").op:
        for desc in (*op.input_desc, *op.output_desc):
            desc.shape.dim[0] = 4
    assert_loads_error(model, r"If 'choose': subgraph 'else' \(else_branch\): Data 'arg0' \(index 0\) is float32\[4\], but "
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
    model = model_def(if_graph())
    net = op_named(model, "then", "NetOutput")
    graph_def_named(model, "then").op.remove(net)
    assert_loads_error(model, r"If 'choose': subgraph 'then' \(then_branch\): the subgraph has no NetOutput node")


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


def test_a_file_whose_cond_returns_a_non_scalar():
    state = [("int64", ()), ("bool", (1,))]
    root = Graph("flagged")
    with root:
        node = functional(root, "While", [graph_ir.Data(0, "int64", ()), graph_ir.Data(1, "bool", (1,))],
                          [subgraph("fc", state, lambda i, flag: [ops.Less(i, Const(np.int64(3)))]),
                           subgraph("fb", state, lambda i, flag: [ops.AddV2(i, Const(np.int64(1))), flag])],
                          name="flagged_loop")
        root.set_outputs([node.output(0)])
    model = model_def(root)
    net = op_named(model, "fc", "NetOutput")
    net.input[0] = "arg1:0"  # the cond now returns the bool[1] flag
    net.input_desc[0].shape.dim.append(1)
    assert_loads_error(model, r"While 'flagged_loop': subgraph 'fc' \(cond\): must return one scalar \(shape \[\]\) of bool "
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
