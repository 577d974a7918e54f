"""Hostile loops and TensorLists, each a small GE graph built with graph_ir's builders, run in a child process that
reports its time and its peak memory beyond the imports (tests/graph_ir/test_hostile_loops.py):
`python -m tests.helpers.hostile_loops CASE` prints one JSON line {seconds, peak_mib, error, outputs}."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

import graph_ir
from graph_ir import Const, Graph, ops
from tests.helpers.control_graphs import add_graph_of, functional, subgraph

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIG = 2**24  # TensorListReserve's count, and the elements of a 16 MiB int8 Fill
FLOATS = 2**22  # the elements of a 16 MiB float32 Fill


def _forever(name: str, state: list[graph_ir.ir.nodes.Handle], specs, body: Callable) -> graph_ir.ir.nodes.Node:
    """While(state[0]) with a NaN flag first in the state (NaN is true, so the cond always holds)."""
    graph = add_graph_of(state[0])
    params = [("float32", ()), *specs]
    return functional(graph, "While", [Const(np.float32(np.nan)), *state],
                      [subgraph(f"{name}_cond", params, lambda flag, *rest: [flag]),
                       subgraph(f"{name}_body", params, lambda flag, *rest: [flag, *body(*rest)])], name=name)


def _int(value: int) -> graph_ir.ir.nodes.Handle:
    return Const(np.int32(value))


def spin() -> Graph:
    """A trivial While(true): nothing but the flag."""
    with Graph("spin") as root:
        node = _forever("spin", [_int(0)], [("int32", ())], lambda i: [i])
        root.set_outputs([node.output(1)])
    return root


def fill_state() -> Graph:
    """A 16 MiB float32 state made by Fill (a few bytes in the file), plus 1 every iteration."""
    with Graph("fill_state") as root:
        big = ops.Fill(Const(np.array([FLOATS], np.int32)), Const(np.float32(0)))
        node = _forever("grow", [big], [("float32", (FLOATS,))], lambda x: [ops.AddV2(x, Const(np.float32(1)))])
        root.set_outputs([node.output(1)])
    return root


def _list_loop(name: str, lists: int, start: Callable, step: Callable) -> Graph:
    """A loop over (i, list_1 .. list_n): every iteration step(list, i) on each list, i + 1."""
    with Graph(name) as root:
        handles = [start() for _ in range(lists)]
        specs = [("int32", ())] + [("variant", ())] * lists
        node = _forever(name, [_int(0), *handles], specs,
                        lambda i, *ls: [ops.AddV2(i, _int(1)), *[step(h, i) for h in ls]])
        root.set_outputs([node.output(1)])
    return root


def push() -> Graph:
    """One scalar pushed onto a list every iteration (quadratic when each push copied the list)."""
    return _list_loop("push", 1, lambda: ops.EmptyTensorList(_int(-1), _int(-1), element_dtype="float32"),
                      lambda h, i: ops.TensorListPushBack(h, Const(np.float32(1)), element_dtype="float32"))


def set_reserved() -> Graph:
    """TensorListReserve(2**24) of int8, then SetItem of element i every iteration."""
    return _list_loop("set_reserved", 1, lambda: ops.TensorListReserve(_int(-1), _int(BIG), element_dtype="int8"),
                      lambda h, i: ops.TensorListSetItem(h, i, Const(np.int8(1)), element_dtype="int8"))


def sixteen_lists() -> Graph:
    """16 lists in a loop's state, each pushed a 1 MiB element every iteration."""
    return _list_loop("sixteen", 16, lambda: ops.EmptyTensorList(_int(-1), _int(-1), element_dtype="float32"),
                      lambda h, i: ops.TensorListPushBack(h, Const(np.ones(2**18, np.float32)),
                                                          element_dtype="float32"))


def many_reserved() -> Graph:
    """24 TensorListReserve(2**24) int8 lists, each with one element set, all alive at the end."""
    with Graph("many_reserved") as root:
        lists = [ops.TensorListSetItem(ops.TensorListReserve(_int(-1), _int(BIG), element_dtype="int8"), _int(k),
                                       Const(np.int8(k)), element_dtype="int8") for k in range(24)]
        root.set_outputs([ops.TensorListLength(h) for h in lists])
    return root


def from_fill() -> Graph:
    """TensorListFromTensor of a 16 MiB int8 Fill (2**24 scalar elements), stacked back."""
    with Graph("from_fill") as root:
        big = ops.Fill(Const(np.array([BIG], np.int32)), Const(np.int8(3)))
        listed = ops.TensorListFromTensor(big, _int(-1), element_dtype="int8")
        stacked = ops.TensorListStack(listed, Const(np.zeros(0, np.int32)), element_dtype="int8", num_elements=BIG)
        last = ops.TensorListGetItem(listed, _int(BIG - 1), Const(np.zeros(0, np.int32)), element_dtype="int8")
        root.set_outputs([ops.Shape(stacked), ops.ReduceMax(stacked, Const(np.int32(0))), last])
    return root


def zero_size() -> Graph:
    """2**24 elements of size 0 listed and stacked back."""
    with Graph("zero_size") as root:
        empty = ops.Fill(Const(np.array([BIG, 0], np.int32)), Const(np.float32(1)))
        listed = ops.TensorListFromTensor(empty, Const(np.array([0], np.int32)), element_dtype="float32")
        stacked = ops.TensorListStack(listed, Const(np.array([0], np.int32)), element_dtype="float32",
                                      num_elements=BIG)
        root.set_outputs([ops.Shape(stacked)])
    return root


def reserved_empty() -> Graph:
    """TensorListReserve(2**24) of elements of shape [0], none set, stacked: a file of a few hundred bytes."""
    with Graph("reserved_empty") as root:
        listed = ops.TensorListReserve(Const(np.array([0], np.int32)), _int(BIG), element_dtype="float32")
        stacked = ops.TensorListStack(listed, Const(np.array([0], np.int32)), element_dtype="float32",
                                      num_elements=BIG)
        root.set_outputs([ops.Shape(stacked)])
    return root


CASES = {f.__name__: f for f in (spin, fill_state, push, set_reserved, sixteen_lists, many_reserved, from_fill,
                                 zero_size, reserved_empty)}


def measure(case: str, timeout: float = 60) -> dict:
    """Runs CASES[case] in a child process; its report (see the module docstring)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, "-m", "tests.helpers.hostile_loops", case], cwd=ROOT, env=env,
                            check=False, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _child(case: str) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    session = graph_ir.Session()
    session.add_graph(0, CASES[case]())
    error, outputs = None, None
    try:
        outputs = [np.asarray(v).tolist() for v in session.run_graph(0, [])]
    except graph_ir.GraphError as e:
        error = str(e)
    seconds = time.perf_counter() - start
    peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024  # ru_maxrss is in KiB on Linux
    print(json.dumps({"seconds": seconds, "peak_mib": peak, "error": error, "outputs": outputs}))


if __name__ == "__main__":
    _child(sys.argv[1])
