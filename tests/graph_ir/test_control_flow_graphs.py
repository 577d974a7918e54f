"""The graphs that hold functional ops (If, Case, While): saved and loaded back byte-identically with GE's subgraph
layout in the ModelDef; the session's Variables read and written inside loop bodies, outputs never aliasing inputs
written later, a body writing its parameter in place on its own copy; subgraph names made unique and an attached
subgraph kept whole (editing it afterwards is caught). The semantics against TensorFlow are in
tests/graph_ir/test_control_flow.py."""

from __future__ import annotations

import numpy as np
import pytest

import graph_ir
from graph_ir import Const, Data, Graph, Session, Variable, ops, proto
from tests.helpers.control_graphs import (
    functional,
    if_graph,
    nested_loop,
    run,
    subgraph,
)


def _layout_model():
    """A root with an If and a While whose body nests a Case: every kind of binding."""
    root = nested_loop()
    with root:
        x = Data(2, "float32", (5,))
        c = Data(3, "bool", ())
        params = [("float32", (5,))]
        branch = functional(root, "StatelessIf", [c, x], [subgraph("keep", params, lambda v: [v]),
                                                          subgraph("flip", params, lambda v: [ops.Neg(v)])])
        outputs = root.outputs + [branch.output(0)]
        root.set_outputs(outputs)
    return root


def test_model_def_has_ges_subgraph_layout():
    model = proto.ModelDef.FromString(_layout_model().serialize())
    names = [g.name for g in model.graph]
    assert names[0] == "nested_root"
    assert sorted(names[1:]) == sorted(["outer_cond", "outer_body", "even", "odd", "keep", "flip"])
    graphs = {g.name: g for g in model.graph}
    ops_of = {name: {op.name: op for op in g.op} for name, g in graphs.items()}
    assert list(ops_of["nested_root"]["outer"].subgraph_name) == ["outer_cond", "outer_body"]
    assert list(ops_of["outer_body"]["parity"].subgraph_name) == ["even", "odd"]
    assert list(ops_of["nested_root"]["StatelessIf"].subgraph_name) == ["keep", "flip"]
    for op in (op for g in graphs.values() for op in g.op):
        assert not {"then_branch", "else_branch", "cond", "body", "branches"} & set(op.attr)
    for name, offset in (("outer_cond", 0), ("outer_body", 0), ("even", 1), ("odd", 1), ("keep", 1)):
        data = [op for op in graphs[name].op if op.type == "Data"]
        assert data, name
        for op in data:
            assert op.attr["_parent_node_index"].i == op.attr["index"].i + offset, (name, op.name)
    assert all("_parent_node_index" not in op.attr for op in graphs["nested_root"].op)
    for name in ("outer_body", "even", "odd", "keep", "flip"):
        net = ops_of[name]["NetOutput"]
        assert [d.attr["_parent_node_index"].i for d in net.input_desc] == list(range(len(net.input_desc)))
    assert all("_parent_node_index" not in d.attr for d in ops_of["outer_cond"]["NetOutput"].input_desc)
    outer = ops_of["nested_root"]["outer"]
    assert [d.name for d in outer.input_desc] == ["input0", "input1", "input2"]
    assert [d.name for d in outer.output_desc] == ["output0", "output1", "output2"]
    assert [d.name for d in ops_of["nested_root"]["StatelessIf"].input_desc] == ["cond", "input0"]


@pytest.mark.parametrize("suffix", [".air", ".pbtxt"])
def test_save_load_round_trip_is_byte_identical(tmp_path, suffix):
    graph = _layout_model()
    path, again = tmp_path / f"model{suffix}", tmp_path / f"again{suffix}"
    graph.save(str(path))
    loaded = graph_ir.load(str(path))
    loaded.save(str(again))
    assert path.read_bytes() == again.read_bytes()
    assert list(loaded.subgraphs) == list(graph.subgraphs)
    assert loaded.node("outer").subgraphs == ["outer_cond", "outer_body"]
    inputs = [np.int32(9), np.arange(3, dtype=np.float32), np.linspace(-1, 1, 5, dtype=np.float32), np.bool_(False)]
    for got, want in zip(run(loaded, *inputs), run(graph, *inputs)):
        np.testing.assert_array_equal(got, want)


def test_variables_in_a_loop_body_are_the_sessions():
    """A body that counts its iterations in a Variable (shared by name with the session)."""
    params = [("int64", ())] * 2
    cond = subgraph("vc", params, lambda i, n: [ops.Less(i, n)])

    def body(i, n):
        count = Variable("count", np.int64(0))
        bump = ops.AssignAdd(count, Const(np.int64(1)))
        nxt = ops.AddV2(i, Const(np.int64(1)), control_inputs=[bump])
        return [nxt, n]

    root = Graph("counting")
    with root:
        node = functional(root, "While", [Const(np.int64(0)), Data(0, "int64", ())],
                          [cond, subgraph("vb", params, body)])
        root.set_outputs([node.output(0)])
    session = Session()
    session.add_graph(0, root)
    assert session.run_graph(0, [np.int64(25)])[0] == 25
    assert session.run_graph(0, [np.int64(5)])[0] == 5
    assert session.get_variables(["count"])[0] == 30


def test_outputs_do_not_alias_inputs_written_later():
    """A branch that returns its parameter, read from a Variable that the parent then assigns: the If output keeps
    the value the branch saw."""
    params = [("float32", (3,))]
    root = Graph("alias")
    with root:
        v = Variable("v", np.array([1, 2, 3], np.float32))
        branch = functional(root, "If", [Const(np.bool_(True)), v], [subgraph("same", params, lambda a: [a]),
                                                                    subgraph("zero", params, lambda a: [ops.Neg(a)])])
        assign = ops.Assign(v, Const(np.zeros(3, np.float32)), control_inputs=[branch])
        root.set_outputs([branch.output(0)], control_inputs=[assign])
    session = Session()
    session.add_graph(0, root)
    np.testing.assert_array_equal(session.run_graph(0, [])[0], [1, 2, 3])
    np.testing.assert_array_equal(session.get_variables(["v"])[0], [0, 0, 0])


def test_a_body_writing_its_parameter_in_place_writes_its_own_copy():
    """The body bumps its Data in place (AssignAdd on a Data input, as GE allows); the Variable fed to the loop and
    the array fed to the graph keep their values."""
    params = [("float32", (2,)), ("int32", ())]
    cond = subgraph("ic", params, lambda x, i: [ops.Less(i, Const(np.int32(4)))])
    body = subgraph("ib", params, lambda x, i: [ops.AssignAdd(x, Const(np.ones(2, np.float32))),
                                                ops.AddV2(i, Const(np.int32(1)))])
    root = Graph("in_place")
    with root:
        v = Variable("start", np.array([10, 20], np.float32))
        loop = functional(root, "While", [v, Data(0, "int32", ())], [cond, body])
        root.set_outputs([loop.output(0)])
    session = Session()
    session.add_graph(0, root)
    np.testing.assert_array_equal(session.run_graph(0, [np.int32(1)])[0], [13, 23])
    np.testing.assert_array_equal(session.get_variables(["start"])[0], [10, 20])
    np.testing.assert_array_equal(session.run_graph(0, [np.int32(4)])[0], [10, 20])


def test_subgraph_names_are_made_unique_and_graphs_stay_whole():
    params = [("float32", ())]
    root = Graph("g")
    with root:
        x = Data(0, "float32", ())
        first = functional(root, "If", [Const(np.bool_(True)), x], [subgraph("g", params, lambda v: [v]),
                                                                  subgraph("b", params, lambda v: [ops.Neg(v)])])
        second = functional(root, "If", [Const(np.bool_(False)), x], [subgraph("b", params, lambda v: [v]),
                                                                    subgraph("b", params, lambda v: [ops.Neg(v)])])
        root.set_outputs([first.output(0), second.output(0)])
    assert first.subgraphs == ["g_1", "b"] and second.subgraphs == ["b_1", "b_2"]
    assert list(root.subgraphs) == ["g_1", "b", "b_1", "b_2"]
    assert [float(v) for v in run(root, np.float32(2))] == [2, -2]
    with pytest.raises(graph_ir.GraphError, match=r"is a subgraph of node 'If'; serialize its root graph 'g'"):
        root.subgraphs["b"].serialize()
    with pytest.raises(graph_ir.GraphError, match=r"add_graph: graph 'b' is a subgraph of node 'If'"):
        Session().add_graph(0, root.subgraphs["b"])


def test_editing_a_subgraph_after_attaching_it_is_caught():
    graph = if_graph()
    then = graph.subgraphs["then"]
    with then:
        then.set_outputs([ops.Cast(then.node("arg0").output(0), dst_type="float16")])
    message = (r"subgraph 'else' \(else_branch\): returns \[float32\[5\]\], but subgraph 'then' \(then_branch\) "
               r"returns \[float16\[5\]\]")
    with pytest.raises(graph_ir.GraphError, match=message):
        graph.serialize()
    with pytest.raises(graph_ir.GraphError, match=message):
        Session().add_graph(0, graph)
    other = graph.subgraphs["else"]
    with other:
        other.set_outputs([ops.Cast(other.node("arg1").output(0), dst_type="float16")])
    with pytest.raises(graph_ir.GraphError, match=r"If 'choose': output_desc says \['float32\[5\]'\], but its "
                                                  r"subgraphs return \['float16\[5\]'\]"):
        graph.serialize()
