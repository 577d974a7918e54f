"""graph_ir.Session's rules against misuse and amplification: memory in proportion to the graph, runs serialized,
the reserved NetOutput role, linear naming, and clear errors for wrong arguments."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import graph_ir
from graph_ir import ops
from tests.helpers.graphs import power_sign_graph
from tests.helpers.threads import run_threads

MIB = 2**20


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_repeated_outputs_share_one_copy():
    """A 1 MiB Const listed 20,000 times by NetOutput: one copy, 20,000 views of it (not 20 GB)."""
    graph = graph_ir.Graph("amplify")
    with graph:
        c = graph_ir.Const(np.arange(MIB // 4, dtype=np.float32), name="c")
        graph.set_outputs([c] * 20_000)
    loaded = graph_ir.loads(graph.serialize())
    session = graph_ir.Session()
    session.add_graph(0, loaded)
    outputs = []
    peak = _peak_bytes(lambda: outputs.extend(session.run_graph(0, [])))
    assert len(outputs) == 20_000 and peak < 16 * MIB, peak
    assert all(np.shares_memory(outputs[0], o) for o in outputs[1:100])
    np.testing.assert_array_equal(outputs[-1], np.arange(MIB // 4, dtype=np.float32))


def test_identity_chains_do_not_amplify():
    """2,000 Identities of a 1 MiB Const, all returned, and 2,000 snapshots of a Variable: memory stays near the
    graph's own size (Identity copies only a buffer that may still be written in place)."""
    graph = graph_ir.Graph("chain")
    with graph:
        h = graph_ir.Const(np.ones(MIB // 4, np.float32), name="c")
        handles = []
        for _ in range(2000):
            h = ops.Identity(h)
            handles.append(h)
        graph.set_outputs(handles)
    session = graph_ir.Session()
    session.add_graph(0, graph)
    assert _peak_bytes(lambda: session.run_graph(0, [])) < 16 * MIB

    # Snapshots of a Variable that an AssignAdd then writes while they are still to be returned: each copies.
    graph = graph_ir.Graph("snapshots")
    with graph:
        var = graph_ir.Variable("big", np.ones(MIB // 4, np.float32))
        snapshots = [ops.Identity(var) for _ in range(2000)]
        bump = ops.AssignAdd(var, graph_ir.Const(np.ones(MIB // 4, np.float32)), control_inputs=snapshots)
        graph.set_outputs([*snapshots, bump])
    with pytest.raises(graph_ir.GraphError, match=r"a run would hold \d+ bytes, above this session's bound"):
        graph_ir.Session().add_graph(0, graph)
    session = graph_ir.Session(max_run_bytes=8 * 2**30)  # allowed when asked for
    session.add_graph(0, graph)
    outputs = session.run_graph(0, [])
    assert np.all(outputs[0] == 1) and np.all(outputs[1999] == 1) and np.all(outputs[-1] == 2)
    # Never written: the snapshots stay views of the Variable (the returned copies are one buffer).
    graph = graph_ir.Graph("read only")
    with graph:
        var = graph_ir.Variable("big", np.ones(MIB // 4, np.float32))
        graph.set_outputs([ops.Identity(var) for _ in range(2000)])
    session = graph_ir.Session()
    session.add_graph(0, graph)
    assert _peak_bytes(lambda: session.run_graph(0, [])) < 16 * MIB


def test_concurrent_runs_equal_a_serial_order():
    """8 threads x 3 runs of one PowerSign step at 1M elements on one Session: the same state as 24 serial runs
    (every run applies the same update, so any serial order gives it)."""
    n, threads, runs = 1 << 20, 8, 3
    grad = np.random.default_rng(5).standard_normal(n).astype(np.float32)
    results = []
    for concurrent in (False, True):
        session = graph_ir.Session()
        session.add_graph(0, power_sign_graph("float32", n))

        def work(session=session):
            for _ in range(runs):
                session.run_graph(0, [grad])

        if concurrent:
            run_threads([work] * threads)
        else:
            for _ in range(threads):
                work()
        results.append(session.get_variables(["w", "w_m"]))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_net_output_is_reserved():
    graph = graph_ir.Graph("g")
    with graph:
        c = graph_ir.Const(np.ones(3, np.float32), name="NetOutput")  # a user name that collides: renamed
        with pytest.raises(graph_ir.GraphError, match="reserved for the graph's output node"):
            graph_ir.Variable("NetOutput", np.ones(3, np.float32))
        graph.set_outputs([c])
        with pytest.raises(graph_ir.GraphError, match="already has a NetOutput node"):
            graph.add_node("NetOutput", [c])
    assert c.node.name == "NetOutput_1"
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.loads(graph.serialize()))
    np.testing.assert_array_equal(session.run_graph(0, [])[0], np.ones(3, np.float32))


def test_naming_is_linear():
    """16,000 default-named Consts: each name costs O(1) look-ups (the count is exact, so no timing is needed)."""
    graph = graph_ir.Graph("names")
    lookups = 0

    class CountingDict(dict):
        def __contains__(self, key):
            nonlocal lookups
            lookups += 1
            return super().__contains__(key)

    graph.nodes = CountingDict()
    with graph:
        for _ in range(16_000):
            graph_ir.Const(np.float32(1.0))
    assert len(graph.nodes) == 16_000 and lookups <= 3 * 16_000, lookups


def test_misuse_gives_clear_errors():
    session = graph_ir.Session()
    with pytest.raises(TypeError, match="graph must be a graph_ir.Graph, got str"):
        session.add_graph(5, "str")
    with pytest.raises(TypeError, match="graph_id must be an int"):
        session.add_graph("0", power_sign_graph())
    session.add_graph(0, power_sign_graph())
    with pytest.raises(TypeError, match="inputs must be a list of arrays, got NoneType"):
        session.run_graph(0, None)
    with pytest.raises(TypeError, match="names must be a list of Variable names, got str 'm2'"):
        session.get_variables("m2")
    with pytest.raises(TypeError, match=r"values must be a dict \{name: array\}, got list"):
        session.set_variables([np.zeros(8, np.float32)])
    with pytest.raises(KeyError, match="no Variable 'nope'"):
        session.set_variables({"nope": np.zeros(8, np.float32)})
    with pytest.raises(TypeError, match="from_tensorflow takes a tf.function, a ConcreteFunction, a tf.Graph or a "
                                        "GraphDef, got NoneType"):
        graph_ir.from_tensorflow(None)
    with pytest.raises(TypeError, match="max_run_bytes must be an int"):
        graph_ir.Session(max_run_bytes="1GB")
