"""The functional ops (If, Case, While and their Stateless forms): built with the builder API, run in
graph_ir.Session and compared with TensorFlow (tf.cond, tf.while_loop, tf.raw_ops.If/Case/While) on the same values;
saved and loaded back byte-identically with GE's subgraph layout in the ModelDef; loops with bounded time and
memory."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import Const, Data, Graph, Session, Variable, ops, proto
from tests.helpers.control_graphs import case_graph, functional, if_graph, nested_ifs, nested_loop, subgraph, sum_loop


def _run(graph: Graph, *inputs, session: Session | None = None) -> list[np.ndarray]:
    session = session or Session()
    session.add_graph(0, graph)
    return session.run_graph(0, list(inputs))


def _values(rng, n=5):
    x = rng.standard_normal(n).astype(np.float32)
    x[0], x[1], x[2] = 0.0, -x[-1], np.nan  # a zero, a tie in magnitude, a NaN
    return x


@pytest.mark.parametrize("op_type", ["If", "StatelessIf"])
def test_if_runs_the_branch_tf_cond_runs(op_type):
    rng = np.random.default_rng(1)
    graph = if_graph(op_type)
    step = tf.function(lambda c, a, b: tf.cond(c, lambda: a * 2 + b, lambda: a - b))
    for c in (True, False):
        x, y = _values(rng), _values(rng)
        want = step(tf.constant(c), x, y).numpy()
        np.testing.assert_array_equal(_run(graph, np.bool_(c), x, y)[0], want)


@pytest.mark.parametrize(("cond", "value"), [
    (("float32", ()), 0.0), (("float32", ()), np.nan), (("float32", ()), -0.0), (("float32", ()), -2.5),
    (("int64", ()), 0), (("int32", ()), 3), (("float32", (1,)), [0.0]), (("float32", (0,)), []),
    (("float64", (1, 1)), [[0.0]]), (("uint8", ()), 0)])
def test_if_cond_truth_is_tfs(cond, value):
    """A non-bool cond: a rank-0 value is true when non-zero (NaN too); any other rank when non-empty."""
    dtype, shape = cond
    c = np.asarray(value, dtype=dtype).reshape(shape)
    x, y = np.arange(5, dtype=np.float32), np.full(5, 3, np.float32)
    spec = tf.TensorSpec([5], tf.float32)
    then = tf.function(lambda a, b: a * 2 + b).get_concrete_function(spec, spec)
    other = tf.function(lambda a, b: a - b).get_concrete_function(spec, spec)
    want = tf.raw_ops.If(cond=tf.constant(c), input=[x, y], Tout=[tf.float32], then_branch=then, else_branch=other)
    np.testing.assert_array_equal(_run(if_graph(cond=cond), c, x, y)[0], want[0].numpy())


@pytest.mark.parametrize("op_type", ["Case", "StatelessCase"])
def test_case_three_branches_and_out_of_range_index_runs_the_last(op_type):
    rng = np.random.default_rng(2)
    spec = tf.TensorSpec([4], tf.float32)
    branches = [tf.function(f).get_concrete_function(spec) for f in (lambda a: a + 0, lambda a: a + 1, lambda a: a * a)]
    session = Session()
    session.add_graph(0, case_graph(op_type))
    for k in (-7, -1, 0, 1, 2, 3, 2**31 - 1):
        x = _values(rng, 4)
        want = tf.raw_ops.Case(branch_index=tf.constant(k, tf.int32), input=[x], Tout=[tf.float32], branches=branches)
        np.testing.assert_array_equal(session.run_graph(0, [np.int32(k), x])[0], want[0].numpy(), err_msg=str(k))


@pytest.mark.parametrize("op_type", ["While", "StatelessWhile"])
def test_while_sums_one_to_ten_thousand(op_type):
    n = 10_000
    loop = tf.function(lambda n: tf.while_loop(lambda i, s: i <= n, lambda i, s: (i + 1, s + i),
                                               (tf.constant(1, tf.int64), tf.constant(0, tf.int64)))[1])
    want = loop(tf.constant(n, tf.int64))
    session = Session()
    session.add_graph(0, sum_loop(op_type))
    start = time.perf_counter()
    got = session.run_graph(0, [np.int64(n)])[0]
    elapsed = time.perf_counter() - start
    assert got == want.numpy() == n * (n + 1) // 2
    assert elapsed < 5, f"{n} iterations took {elapsed:.2f} s"
    assert session.run_graph(0, [np.int64(0)])[0] == 0  # no iteration: the initial state


def _loop_over_vector(size: int) -> Graph:
    """while i < n: x = x * 0.5 + 1 on a float64[size] vector."""
    state = [("int64", ()), ("int64", ()), ("float64", (size,))]
    cond = subgraph("c", state, lambda i, n, x: [ops.Less(i, n)])
    body = subgraph("b", state, lambda i, n, x: [ops.AddV2(i, Const(np.int64(1))), n,
                                                 ops.AddV2(ops.Mul(x, Const(0.5, "float64")), Const(1.0, "float64"))])
    root = Graph("vector_loop")
    with root:
        n, x = Data(0, "int64", ()), Data(1, "float64", (size,))
        node = functional(root, "While", [Const(np.int64(0)), n, x], [cond, body])
        root.set_outputs([node.output(2)])
    return root


def test_while_memory_does_not_grow_with_iterations():
    size = 20_000  # 160 KB of state
    session = Session()
    graph = _loop_over_vector(size)
    session.add_graph(0, graph)
    x = np.zeros(size)
    peaks = []
    for n in (10, 1000):
        tracemalloc.start()
        out = session.run_graph(0, [np.int64(n), x])[0]
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert np.all(out == 2 - 2.0 ** (1 - n))
    assert peaks[1] < peaks[0] + 2 * x.nbytes, peaks
    assert peaks[1] < 8 * x.nbytes, peaks
    # The planner counts a While as its body's peak plus the loop state: a bound on what a run allocates.
    assert max(peaks) <= session._plans[0].peak_bytes, (peaks, session._plans[0].peak_bytes)


def test_nested_if_inside_while_matches_tf():
    rng = np.random.default_rng(3)
    session = Session()
    session.add_graph(0, nested_loop())
    for n in (0, 1, 7, 40):
        x = _values(rng, 3)

        def body(i, v):
            s = tf.cast(i, tf.float32)
            return i + 1, tf.cond(tf.equal(i % 2, 0), lambda: v + s, lambda: v - s)

        want = tf.function(lambda n, x: tf.while_loop(lambda i, v: i < n, body, (tf.constant(0), x)))(
            tf.constant(n), tf.constant(x))
        got = session.run_graph(0, [np.int32(n), x])
        assert got[0] == want[0].numpy()
        np.testing.assert_array_equal(got[1], want[1].numpy())


@pytest.mark.parametrize(("dtype", "start"), [("int32", 13), ("float32", 6.0), ("int8", -4)])
def test_while_cond_may_be_a_number(dtype, start):
    """cond returns the counter itself: the loop runs while it is non-zero (TF's raw While does the same)."""
    params = [(dtype, ())]
    step = np.asarray(1 if start > 0 else -1, dtype).item()
    cond = subgraph("count_cond", params, lambda k: [k])
    body = subgraph("count_body", params, lambda k: [ops.Sub(k, Const(np.asarray(step, dtype)))])
    root = Graph("count_root")
    with root:
        node = functional(root, "While", [Data(0, dtype, ())], [cond, body])
        root.set_outputs([node.output(0)])
    spec = tf.TensorSpec([], dtype)
    tf_cond = tf.function(lambda k: k).get_concrete_function(spec)
    tf_body = tf.function(lambda k: k - tf.constant(step, dtype)).get_concrete_function(spec)
    value = np.asarray(start, dtype)
    want = tf.raw_ops.While(input=[value], cond=tf_cond, body=tf_body)[0].numpy()
    np.testing.assert_array_equal(_run(root, value)[0], want)


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
    for got, want in zip(_run(loaded, *inputs), _run(graph, *inputs)):
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


def test_the_planner_bounds_a_body_that_allocates_too_much():
    graph = _loop_over_vector(100_000)  # 800 KB per vector
    with pytest.raises(graph_ir.GraphError, match=r"above this session's bound .* at node 'While' \(While"):
        Session(max_run_bytes=1_000_000).add_graph(0, graph)
    Session(max_run_bytes=10_000_000).add_graph(0, graph)


def test_nesting_is_bounded_at_32_levels():
    assert _run(nested_ifs(32), np.float32(0))[0] == 32
    with pytest.raises(graph_ir.GraphError, match=r"would nest subgraphs 33 deep; at most 32"):
        nested_ifs(33)


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
    assert [float(v) for v in _run(root, np.float32(2))] == [2, -2]
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
