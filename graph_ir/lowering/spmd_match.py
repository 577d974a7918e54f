"""The ranks' graphs made one graph (SPMD), for graph_ir.from_distributed: rank k's nodes matched with rank 0's by
structure, then renamed after them and put in their order, so that every rank holds the same graph, node names,
order and all (the ranks' Hcom nodes are paired by name and order; graph_ir/distributed checks them at add_graph).
Only the values of Consts (a replica's own constants) may differ. The lowering walks each rank's part in its own
order, so two ranks' graphs may hold the same nodes in different orders. Graphs in the same order pair by place;
others by a hash of each node's type, attributes, output descs, inputs and subgraphs, refined by what reads it (so
that twins, such as two reads of one Variable, pair as their readers do), from the outputs back."""

from __future__ import annotations

import hashlib
from collections import defaultdict

from graph_ir.ir.graph import Graph
from graph_ir.ir.nodes import Node
from graph_ir.lowering.ops.hcom import UNIFORM_SUFFIX


def signature(node: Node) -> tuple:
    """What must agree between the ranks' nodes besides their inputs: type, attributes (not Const values, except a
    folded gather's, which every rank must hold alike), a Variable's name, output descs."""
    attrs = {k: v for k, v in node.attrs.items() if k != "value" and not hasattr(v, "shape")}
    if node.name.endswith(UNIFORM_SUFFIX):  # a gather folded on the premise that every rank gathers this value
        attrs["value"] = node.attrs["value"].tolist()
    if node.type == "Variable":
        attrs["name"] = node.name
    descs = [(d.dtype.name, tuple(d.shape)) for d in node.output_descs]
    return node.type, repr(sorted(attrs.items(), key=lambda kv: kv[0])), descs


def _positions(graph: Graph) -> list[tuple]:
    """Each node's signature, data inputs by position, how many control inputs, and subgraphs', in order."""
    order = {id(n): k for k, n in enumerate(graph.nodes.values())}
    return [(signature(node), [(order.get(id(h.node)), h.index) if h is not None else None for h in node.inputs],
             len(node.control_inputs), [_positions(g) for g in node.subgraph_graphs]) for node in graph.nodes.values()]


def _hashes(graph: Graph) -> dict[int, str]:
    memo: dict[int, str] = {}
    for node in graph.topological_order():
        key = (signature(node), [(memo[id(h.node)], h.index) if h is not None else None for h in node.inputs],
               sorted(memo[id(c)] for c in node.control_inputs), [_graph_hash(g) for g in node.subgraph_graphs])
        memo[id(node)] = hashlib.sha256(repr(key).encode()).hexdigest()
    # Refined by what reads each node (twins, such as two reads of one Variable, differ by their readers).
    for _ in range(3):
        readers: dict[int, list] = defaultdict(list)
        for node in graph.nodes.values():
            for k, h in enumerate(node.inputs):
                if h is not None:
                    readers[id(h.node)].append((memo[id(node)], k, h.index))
            for c in node.control_inputs:
                readers[id(c)].append((memo[id(node)], -1, -1))
        memo = {key: hashlib.sha256(repr((value, sorted(readers[key]))).encode()).hexdigest()
                for key, value in memo.items()}
    return memo


def _graph_hash(graph: Graph) -> str:
    return hashlib.sha256(repr(sorted(_hashes(graph).values())).encode()).hexdigest()


def align(graph: Graph, reference: Graph) -> Node | None:
    """Makes `graph` rank 0's `reference` in names and order where their structures agree; else leaves it as it is
    and returns reference's first node (in order) without a counterpart in `graph` (or graph's first extra node).

    Nodes pair from the outputs back: a paired node's data inputs pair by position (so that twins, nodes of equal
    hashes such as two reads of one Variable, pair as their readers do), then control inputs by hash, then what is
    left by hash."""
    if _positions(graph) == _positions(reference):  # the same order already: paired by place
        _rename(graph, reference, list(zip(graph.nodes.values(), reference.nodes.values(), strict=True)))
        return None
    mine, theirs = _hashes(graph), _hashes(reference)
    pairs: dict[int, Node] = {}
    used: set[int] = set()

    def pair(like: Node, node: Node) -> bool:
        if id(like) in pairs:
            return pairs[id(like)] is node
        if id(node) in used or theirs[id(like)] != mine[id(node)]:
            return False
        pairs[id(like)] = node
        used.add(id(node))
        return True

    outputs = [[n for n in g.nodes.values() if n.type == "NetOutput"] for g in (reference, graph)]
    data = list(zip(*outputs))
    controls: list[tuple[Node, Node]] = []
    while data or controls:
        like, node = data.pop() if data else controls.pop()
        if id(like) in pairs and pairs[id(like)] is node:
            continue
        if not pair(like, node):
            if controls or id(like) in pairs or id(node) in used:  # a twin taken another way: paired by hash
                continue
            return like
        data.extend((a.node, b.node) for a, b in zip(like.inputs, node.inputs) if a is not None and b is not None)
        free = [c for c in node.control_inputs if id(c) not in used]
        for c in like.control_inputs:
            match = next((n for n in free if mine[id(n)] == theirs[id(c)]), None)
            if match is not None and id(c) not in pairs:
                free.remove(match)
                controls.append((c, match))
    buckets: dict[str, list[Node]] = defaultdict(list)
    for node in graph.nodes.values():
        if id(node) not in used:
            buckets[mine[id(node)]].append(node)
    for like in reference.nodes.values():
        if id(like) not in pairs:
            bucket = buckets.get(theirs[id(like)])
            if not bucket:
                return like
            pair(like, bucket.pop(0))
    extra = next((n for bucket in buckets.values() for n in bucket), None)
    if extra is not None:
        return extra
    _rename(graph, reference, [(pairs[id(like)], like) for like in reference.nodes.values()])
    return None


def _rename(graph: Graph, reference: Graph, pairs: list[tuple[Node, Node]]) -> None:
    graph.nodes = {}
    for node, like in pairs:
        node.name = like.name
        graph.nodes[like.name] = node
        for sub, sub_like in zip(node.subgraph_graphs, like.subgraph_graphs, strict=True):
            sub.name = sub_like.name
            align(sub, sub_like)  # the same hashes: it matches
    graph._next_suffix = dict(reference._next_suffix)
    by_name = {g.name: g for g in graph.subgraphs.values()}
    graph.subgraphs = {name: by_name[name] for name in reference.subgraphs}
