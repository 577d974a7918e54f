"""GE graphs with functional ops (If, Case, While), built with the builder API, for the control-flow tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from graph_ir import Const, Data, Graph, Session, ops
from graph_ir.ir.nodes import Handle, Node

Spec = tuple[str, tuple[int, ...]]  # (dtype, shape) of a parameter


def subgraph(name: str, params: Sequence[Spec], fn: Callable[..., Sequence[Handle]]) -> Graph:
    """A subgraph whose Data nodes take `params` (by index) and whose NetOutput returns fn(*data handles)."""
    graph = Graph(name)
    with graph:
        handles = [Data(k, dtype, shape, name=f"arg{k}") for k, (dtype, shape) in enumerate(params)]
        graph.set_outputs(list(fn(*handles)))
    return graph


def functional(graph: Graph, op_type: str, inputs: Sequence[Handle], subgraphs: Sequence[Graph],
               name: str | None = None, **attrs) -> Node:
    return graph.add_node(op_type, list(inputs), attrs, name=name, subgraphs=list(subgraphs))


def if_graph(op_type: str = "If", cond: Spec = ("bool", ())) -> Graph:
    """root(c, x, y) = then(x, y) = x * 2 + y if c else else(x, y) = x - y, on float32[5]."""
    params = [("float32", (5,)), ("float32", (5,))]
    then = subgraph("then", params, lambda x, y: [ops.AddV2(ops.Mul(x, Const(np.float32(2))), y)])
    other = subgraph("else", params, lambda x, y: [ops.Sub(x, y)])
    root = Graph("if_root")
    with root:
        c, x, y = Data(0, *cond), Data(1, "float32", (5,)), Data(2, "float32", (5,))
        node = functional(root, op_type, [c, x, y], [then, other], name="choose")
        root.set_outputs([node.output(0)])
    return root


def case_graph(op_type: str = "Case") -> Graph:
    """root(k, x) = [x + 0, x + 1, x * x][k] (the last branch for any other k), on float32[4]."""
    params = [("float32", (4,))]
    branches = [subgraph("branch0", params, lambda x: [ops.AddV2(x, Const(np.float32(0)))]),
                subgraph("branch1", params, lambda x: [ops.AddV2(x, Const(np.float32(1)))]),
                subgraph("branch2", params, lambda x: [ops.Mul(x, x)])]
    root = Graph("case_root")
    with root:
        k, x = Data(0, "int32", ()), Data(1, "float32", (4,))
        node = functional(root, op_type, [k, x], branches, name="pick")
        root.set_outputs([node.output(0)])
    return root


def sum_loop(op_type: str = "While", name: str = "sum_root") -> Graph:
    """root(n) = 1 + 2 + ... + n by a loop over (i, total, n), int64."""
    params = [("int64", ())] * 3
    cond = subgraph("sum_cond", params, lambda i, total, n: [ops.LessEqual(i, n)])
    body = subgraph("sum_body", params, lambda i, total, n: [ops.AddV2(i, Const(np.int64(1))), ops.AddV2(total, i), n])
    root = Graph(name)
    with root:
        n = Data(0, "int64", ())
        node = functional(root, op_type, [Const(np.int64(1)), Const(np.int64(0)), n], [cond, body], name="loop")
        root.set_outputs([node.output(1)])
    return root


def nested_loop() -> Graph:
    """root(n, x) loops i = 0..n-1 over a float32[3] vector: an If in the body adds i to x when i is even and
    subtracts it when odd; returns (i, x)."""
    state = [("int32", ()), ("int32", ()), ("float32", (3,))]  # i, n, x

    def body(i, n, x):
        step = ops.Cast(i, dst_type="float32")
        params = [("float32", ()), ("float32", (3,))]
        add = subgraph("even", params, lambda s, v: [ops.AddV2(v, s)])
        sub = subgraph("odd", params, lambda s, v: [ops.Sub(v, s)])
        graph = add_graph_of(i)
        even = ops.Equal(ops.FloorMod(i, Const(np.int32(2))), Const(np.int32(0)))
        branch = functional(graph, "If", [even, step, x], [add, sub], name="parity")
        return [ops.AddV2(i, Const(np.int32(1))), n, branch.output(0)]

    cond = subgraph("outer_cond", state, lambda i, n, x: [ops.Less(i, n)])
    loop_body = subgraph("outer_body", state, body)
    root = Graph("nested_root")
    with root:
        n, x = Data(0, "int32", ()), Data(1, "float32", (3,))
        node = functional(root, "While", [Const(np.int32(0)), n, x], [cond, loop_body], name="outer")
        root.set_outputs([node.output(0), node.output(2)])
    return root


def add_graph_of(handle: Handle) -> Graph:
    """The graph a handle's node belongs to (the innermost `with graph:` while building)."""
    from graph_ir.ir.graph import default_graph

    graph = default_graph()
    assert graph.nodes.get(handle.node.name) is handle.node
    return graph


def nested_ifs(depth: int) -> Graph:
    """A root whose If nests `depth` levels of subgraphs: level k's then-branch holds the If of level k + 1."""
    params = [("float32", ())]
    inner = None
    for level in range(depth, 0, -1):
        leaf = inner

        def then_fn(x, leaf=leaf, level=level):
            if leaf is None:
                return [ops.AddV2(x, Const(np.float32(1)))]
            graph = add_graph_of(x)
            node = functional(graph, "If", [Const(np.bool_(True)), x], [leaf, subgraph(f"e{level + 1}", params,
                                                                                        lambda v: [v])])
            return [ops.AddV2(node.output(0), Const(np.float32(1)))]

        inner = subgraph(f"t{level}", params, then_fn)
    root = Graph("deep_root")
    with root:
        x = Data(0, "float32", ())
        node = functional(root, "If", [Const(np.bool_(True)), x], [inner, subgraph("e1", params, lambda v: [v])])
        root.set_outputs([node.output(0)])
    return root


def run(graph: Graph, *inputs, session: Session | None = None) -> list[np.ndarray]:
    """graph's outputs for `inputs`, run in `session` (a fresh graph_ir.Session by default) as graph 0."""
    session = session or Session()
    session.add_graph(0, graph)
    return session.run_graph(0, list(inputs))
