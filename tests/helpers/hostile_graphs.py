"""Helpers of the hostile-graph tests (tests/graph_ir/test_hostile_conv_*.py, test_hostile_subgraph*.py): a graph
built, saved, loaded and run with its peak memory and time, the peak the planner states for it; and the ModelDef surgery that makes a hostile file."""

from __future__ import annotations

import re
import time
import tracemalloc

import numpy as np
import pytest

import graph_ir
from graph_ir import Graph, proto

MiB = 2**20
S1 = [1, 1, 1, 1]


def run_hostile(build, inputs, *, via_file: bool = True) -> tuple[list[np.ndarray], int, float]:
    """Builds build(*Data handles), saves and loads it, runs it in a Session: (outputs, the bytes the run allocated
    at its peak, seconds)."""
    graph = graph_ir.Graph("hostile")
    with graph:
        out = build(*[graph_ir.Data(k, str(a.dtype), a.shape, name=f"in{k}") for k, a in enumerate(inputs)])
        graph.set_outputs(list(out) if isinstance(out, (list, tuple)) else [out])
    if via_file:
        graph = graph_ir.loads(graph.to_model_def().SerializeToString())
    return run_measured(graph, inputs)


def run_measured(graph: Graph, inputs) -> tuple[list[np.ndarray], int, float]:
    """Runs `graph` once in a new Session: (outputs, the bytes NumPy allocated at the run's peak, seconds)."""
    session = graph_ir.Session()
    session.add_graph(0, graph)
    tracemalloc.start()
    try:
        start = time.perf_counter()
        outputs = session.run_graph(0, list(inputs))
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return outputs, peak, seconds


def planned_bytes(graph: Graph) -> int:
    """The peak the Session's planner states for `graph` (read from its refusal under a bound of 0)."""
    with pytest.raises(graph_ir.GraphError, match="a run would hold") as refused:
        graph_ir.Session(max_run_bytes=0).add_graph(0, graph)
    return int(re.search(r"a run would hold (\d+) bytes", str(refused.value)).group(1))


def check_plan_bounds_allocation(graph: Graph, inputs, slack: int = 64 * 1024) -> None:
    """The planner's peak for `graph` (outputs plus the executors' WORKSPACE) bounds what a run of it allocates."""
    planned = planned_bytes(graph)
    _, allocated, _ = run_measured(graph, inputs)
    assert allocated <= planned + slack, (allocated, planned)


def ints(*values) -> np.ndarray:
    """An int32 array of `values` (shape and size inputs)."""
    return np.array(values, np.int32)


def model_def(graph: Graph):
    """The graph's ModelDef, to make hostile by editing its fields."""
    return proto.ModelDef.FromString(graph.serialize())


def graph_def_named(model, name):
    """The GraphDef of `model` named `name`."""
    return next(g for g in model.graph if g.name == name)


def op_named(model, graph, name):
    """The OpDef `name` of `model`'s GraphDef `graph`."""
    return next(op for op in graph_def_named(model, graph).op if op.name == name)


def assert_loads_error(model, match: str) -> None:
    """Loading `model` raises a GraphError matching `match`."""
    with pytest.raises(graph_ir.GraphError, match=match):
        graph_ir.loads(model.SerializeToString())
