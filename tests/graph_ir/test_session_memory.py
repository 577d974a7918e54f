"""The Session's memory planner counts the executors' working memory (graph_ir.executors.WORKSPACE), names the node
of a refused peak, and its plan bounds what a run really allocates (NumPy's allocations, traced)."""

from __future__ import annotations

import numpy as np
import pytest

import graph_ir
from graph_ir import ops
from tests.helpers.hostile_graphs import check_plan_bounds_allocation

MiB = 2**20
S1, S2 = [1, 1, 1, 1], [1, 2, 2, 1]
POOL = {"ksize": [1, 3, 3, 1], "strides": S2, "padding": "SAME"}


def _graph(build, inputs) -> graph_ir.Graph:
    graph = graph_ir.Graph("memory")
    with graph:
        out = build(*[graph_ir.Data(k, str(a.dtype), a.shape, name=f"in{k}") for k, a in enumerate(inputs)])
        graph.set_outputs(list(out) if isinstance(out, (list, tuple)) else [out])
    return graph


def test_the_refusal_counts_working_memory_and_names_the_node():
    """A Conv2D of 2 MiB in and out whose im2col matrix is 19 MiB: under an 8 MiB bound, refused at that node."""
    x, f = np.ones((8, 32, 32, 64), np.float32), np.ones((3, 3, 64, 64), np.float32)
    graph = _graph(lambda x, f: ops.Relu(ops.Conv2D(x, f, strides=S1, pads=[1, 1, 1, 1], name="conv")), [x, f])
    with pytest.raises(graph_ir.GraphError, match=r"a run would hold \d+ bytes, above this session's bound of "
                                                  r"8388608 bytes, at node 'conv' \(Conv2D: 2097152 bytes of outputs "
                                                  r"and \d+ bytes of working memory"):
        graph_ir.Session(max_run_bytes=8 * MiB).add_graph(0, graph)
    graph_ir.Session(max_run_bytes=64 * MiB).add_graph(0, graph)  # allowed when asked for


def _floats(rng, shape, dtype="float32", special: bool = False) -> np.ndarray:
    a = rng.standard_normal(shape).astype(dtype)
    if special:
        a.reshape(-1)[::7] = np.nan
    return a


def _cases():
    """(name, build, inputs): each conv and pool executor down each of its ways (im2col or per tap, blocks, 16-bit
    inputs)."""
    rng = np.random.default_rng(0)
    x, f = _floats(rng, (4, 24, 20, 16)), _floats(rng, (3, 3, 16, 8))
    dy = _floats(rng, (4, 24, 20, 8))
    same = {"strides": S1, "pads": [1, 1, 1, 1]}
    conv = lambda x, f: ops.Conv2D(x, f, **same)
    filter_grad = lambda x, dy: ops.Conv2DBackpropFilter(x, np.array([3, 3, 16, 8], np.int32), dy, **same)
    input_grad = lambda f, dy: ops.Conv2DBackpropInput(np.array(x.shape, np.int32), f, dy, **same)
    huge = {"strides": [1, 7, 7, 1], "pads": [300, 300, 300, 300]}
    pooled = _floats(rng, (4, 12, 10, 16))
    return [
        ("conv-im2col", conv, [x, f]),
        ("conv-per-tap-nan-filter", conv, [x, _floats(rng, f.shape, special=True)]),
        ("conv-float16", conv, [x.astype(np.float16), f.astype(np.float16)]),
        ("conv-huge-pads", lambda x, f: ops.Conv2D(x, f, **huge), [x, f]),
        ("conv-large-window", conv, [_floats(rng, (1, 16, 16, 8)), _floats(rng, (3, 3, 8, 2))]),
        ("filter-grad-im2col", filter_grad, [x, dy]),
        ("filter-grad-per-tap-nan-dy", filter_grad, [x, _floats(rng, dy.shape, special=True)]),
        ("filter-grad-float64", filter_grad, [x.astype(np.float64), dy.astype(np.float64)]),
        ("input-grad-blocks", input_grad, [f, dy]),
        ("input-grad-float64", input_grad, [f.astype(np.float64), dy.astype(np.float64)]),
        ("input-grad-huge-pads", lambda f, dy: ops.Conv2DBackpropInput(np.array([4, 9, 8, 16], np.int32), f, dy,
                                                                       **huge), [f, _floats(rng, (4, 87, 87, 8))]),
        ("max-pool", lambda x: ops.MaxPool(x, **POOL), [x]),
        ("avg-pool-float16", lambda x: ops.AvgPool(x, **POOL), [x.astype(np.float16)]),
        ("max-pool-grad", lambda x, dy: ops.MaxPoolGrad(x, ops.MaxPool(x, **POOL), dy, **POOL), [x, pooled]),
        ("avg-pool-grad", lambda dy: ops.AvgPoolGrad(np.array(x.shape, np.int32), dy, **POOL), [pooled]),
    ]


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c[0])
def test_the_plan_bounds_what_a_run_allocates(case):
    _, build, inputs = case
    check_plan_bounds_allocation(_graph(build, inputs), inputs)


def test_a_ragged_list_input_names_its_index():
    graph = _graph(lambda x: ops.Relu(x), [np.ones((2, 2), np.float32)])
    session = graph_ir.Session()
    session.add_graph(0, graph)
    with pytest.raises(ValueError, match=r"input 0 \(in0\) is not an array of one shape and dtype"):
        session.run_graph(0, [[[1.0, 2.0], [3.0]]])

