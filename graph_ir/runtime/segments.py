"""Graphs whose sizes depend on values (a Where's count, an If whose branches return other sizes), run part by part,
as GE runs a graph with unknown shapes: the nodes before such a node are one static part, planned at the sizes the
run has reached; the node itself runs on its inputs' values, and its results give the sizes of the next part.

- Deciders: a node of a valued op (graph_ir/opset/valued.py), and an If or Case that holds one in a branch, or whose
  branches return other sizes: it runs the branch its predicate picks, that branch itself part by part. A While that
  holds one is refused when the graph is added, naming it.
- A part's plan is kept by the sizes of what it takes (at most max_plans per part, the least recently used dropped).
- Values cross from one part to the next as copies, so a later in-place write cannot change them; a part reads the
  Variables and Consts it needs itself, and an in-place op's result is read as its Variable.
- Memory: each part is planned and bounded as a static graph (graph_ir/runtime/planner.py); a decider's result is
  in proportion to its input (Where: at most the input's elements times its rank).
- A run that fails in a part leaves the Variables as the parts before it wrote them, as a failed GE run does."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from graph_ir.dynamic.instance import call_shapes, check_call_shapes, instantiate_part, part_input_name
from graph_ir.executors import EXECUTORS
from graph_ir.executors.control import truth
from graph_ir.ir.errors import GraphError
from graph_ir.ir.graph import NET_OUTPUT, Graph
from graph_ir.ir.nodes import Node, TensorDesc
from graph_ir.opset.control import IF_OPS, WHILE_OPS, branch_sizes_differ, data_offset
from graph_ir.runtime.planner import Plan, plan

Key = tuple[str, int]
_SOURCES = ("Variable", "Const")


def is_decider(node: Node) -> bool:
    """Whether the sizes after `node` are known only once it has run (see the module docstring)."""
    if node.op.outputs_from == "valued":
        return True
    if not node.subgraph_graphs:
        return False
    held = any(is_decider(n) for g in node.subgraph_graphs for n in g.nodes.values())
    return held or (node.type not in WHILE_OPS and branch_sizes_differ(node.subgraph_graphs))


def has_deciders(graph: Graph) -> bool:
    """Whether graph_ir.Session runs `graph` part by part (see the module docstring)."""
    return any(is_decider(n) for n in graph.nodes.values())


def _state_source(node: Node, index: int) -> Node | None:
    """The Variable or Const whose buffer output `index` of `node` is (through in-place ops), else None."""
    while node.type not in _SOURCES:
        if index not in node.op.refs:
            return None
        h = node.inputs[node.op.refs[index]]
        node, index = h.node, h.index
    return node


class PartedGraph:
    """A graph run part by part around its deciders, with the plans of its parts by sizes."""

    def __init__(self, graph: Graph, max_run_bytes: int | None, max_plans: int):
        self.graph, self.max_run_bytes, self.max_plans = graph, max_run_bytes, max_plans
        self.largest_peak = 0
        for node in graph.nodes.values():
            if node.type == "RefData":
                raise GraphError(f"RefData {node.name!r}: a graph whose sizes depend on values (its Where nodes) "
                                 "takes Data inputs only")
            if node.type in WHILE_OPS and is_decider(node):
                raise GraphError(f"{node.type} {node.name!r}: its body holds a node whose sizes depend on values "
                                 "(a Where); graph_ir runs such nodes outside loops only")
        order = [n for n in graph.topological_order() if n.type != NET_OUTPUT]
        self.parts: list[list[Node]] = [[]]
        self.deciders: list[Node | None] = []
        for node in order:
            if is_decider(node):
                self.deciders.append(node)
                self.parts.append([])
            elif node.type in ("Data",):
                continue
            else:
                self.parts[-1].append(node)
        self.deciders.append(None)
        later: set[Key] = {(h.node.name, h.index) for h in graph.nodes[NET_OUTPUT].inputs} \
            if NET_OUTPUT in graph.nodes else set()
        self.outputs: list[list[Key]] = []
        self.takes: list[dict[Key, Node]] = []
        for part, decider in reversed(list(zip(self.parts, self.deciders))):
            if decider is not None:
                later |= {(h.node.name, h.index) for h in decider.inputs if h is not None}
            inside = {n.name for n in part}
            self.outputs.insert(0, sorted(k for k in later if k[0] in inside and _state_source(
                graph.nodes[k[0]], k[1]) is None))
            taken: dict[Key, Node] = {}
            for n in part:
                for h in n.inputs:
                    if h is not None and h.node.name not in inside:
                        taken[(h.node.name, h.index)] = h.node
            self.takes.insert(0, taken)
            later |= set(taken)
        self.plans: list[OrderedDict[tuple, tuple]] = [OrderedDict() for _ in self.parts]
        self.branches: dict[str, PartedGraph] = {}

    def _part_plan(self, k: int, values: dict[Key, np.ndarray], known: dict[Key, np.ndarray],
                   lists: dict[Key, Any]) -> tuple[Plan, list[Key], dict[Key, np.ndarray], dict[Key, Any]]:
        """Part k's plan at the sizes `values` have reached, with the values in `known` folded in and the list
        handles holding what `lists` says; also its outputs that fold into Consts there, and what its list outputs
        hold (known to the parts after it)."""
        externals: dict[Key, TensorDesc] = {}
        sources: dict[str, Node] = {}
        aliases: dict[Key, str] = {}
        for key, node in self.takes[k].items():
            source = _state_source(node, key[1])
            if source is None:
                desc = node.output_descs[key[1]]  # a list's desc: what it holds at this run's sizes
                externals[key] = TensorDesc("y", desc.dtype, tuple(np.shape(values[key])), lists.get(key))
                continue
            sources[source.name] = source
            if source is not node:
                aliases[key] = source.name
        fed = list(externals)
        held = {key: known[key] for key in fed if key in known}
        signature = (tuple((externals[key].shape, repr(externals[key].list_meta)) for key in fed),
                     tuple((key, v.dtype.str, v.shape, v.tobytes()) for key, v in held.items()))
        cache = self.plans[k]
        found = cache.get(signature)
        if found is not None:
            cache.move_to_end(signature)
            return found
        part = instantiate_part(self.graph, list(sources.values()), self.parts[k], externals, aliases,
                                self.outputs[k], held)
        results = list(zip(self.outputs[k], part.nodes[NET_OUTPUT].inputs))
        folded = {key: h.node.attrs["value"] for key, h in results if h.node.type == "Const"}
        # Values from earlier parts are this run's own copies: copied again only for a part that writes one in place.
        writes = any(n.inputs[i].node.type == "Data" for n in part.nodes.values() for i in n.op.refs.values())
        made = (plan(part, self.max_run_bytes), fed, folded, {key: h.desc.list_meta for key, h in results
                                                              if h.desc.list_meta is not None}, writes)
        cache[signature] = made
        while len(cache) > self.max_plans:
            cache.popitem(last=False)
        return made

    def run(self, session: Any, feeds: dict[str, np.ndarray], wrap: Callable | None,
            known: dict[str, np.ndarray] | None = None, list_metas: dict[str, Any] | None = None) -> list[np.ndarray]:
        """Runs the graph on `feeds` (Data node name -> its array; `known`: those that are the same small value at
        every run, a shape passed into a branch); returns the NetOutput values (not copied)."""
        values: dict[Key, np.ndarray] = {(name, 0): array for name, array in feeds.items()}
        held: dict[Key, np.ndarray] = {(name, 0): value for name, value in (known or {}).items()}
        lists: dict[Key, Any] = {(name, 0): meta for name, meta in (list_metas or {}).items()}
        for k, decider in enumerate(self.deciders):
            if self.parts[k]:
                planned, fed, folded, metas, writes = self._part_plan(k, values, held, lists)
                held.update(folded)
                lists.update(metas)
                if wrap is not None:
                    planned = _wrapped(planned, wrap)
                part_feeds = {part_input_name(key): _copy(values[key]) if writes else values[key] for key in fed}
                results = session._run(planned, part_feeds)
                values.update(zip(self.outputs[k], results))
                self.largest_peak = max(self.largest_peak, planned.peak_bytes)
            if decider is not None:
                args = [None if h is None else self._value(session, values, h.node, h.index) for h in decider.inputs]
                results = self._decide(session, decider, args, (held, lists), wrap)
                values.update(((decider.name, j), r) for j, r in enumerate(results))
        net = self.graph.nodes.get(NET_OUTPUT)
        return [] if net is None else [self._value(session, values, h.node, h.index, copy=True) for h in net.inputs]

    def _value(self, session: Any, values: dict[Key, np.ndarray], node: Node, index: int,
               copy: bool = False) -> np.ndarray:
        """The run's value of output `index` of `node`; a Variable's own buffer, or a copy of it."""
        source = _state_source(node, index)
        if source is None:
            return values[(node.name, index)]
        if source.type == "Variable":
            return _copy(session._variables[source.name]) if copy else session._variables[source.name]
        return source.attrs["value"]

    def _decide(self, session: Any, node: Node, args: list[Any], facts: tuple[dict[Key, Any], dict[Key, Any]],
                wrap: Callable | None) -> list[np.ndarray]:
        if node.op.outputs_from == "valued":
            return EXECUTORS[node.type](node, args)
        if node.type in IF_OPS:
            branch = node.subgraph_graphs[0 if truth(args[0]) else 1]
        else:
            index = int(np.asarray(args[0]).reshape(-1)[0])
            graphs = node.subgraph_graphs
            branch = graphs[index if 0 <= index < len(graphs) else len(graphs) - 1]
        params = args[data_offset(node.type):]
        handles = [h for h in node.inputs[data_offset(node.type):] if h is not None]
        inner = self.branches.get(branch.name)
        if inner is None:
            inner = self.branches[branch.name] = PartedGraph(branch, self.max_run_bytes, self.max_plans)
        held, lists = facts
        data, known, metas = {}, {}, {}
        for n in (n for n in branch.nodes.values() if n.type == "Data"):
            index, h = n.attrs["index"], handles[n.attrs["index"]]
            source = _state_source(h.node, h.index)
            data[n.name] = _copy(params[index]) if source is not None and source.type == "Variable" else params[index]
            value = source.attrs["value"] if source is not None and source.type == "Const" else \
                held.get((h.node.name, h.index))
            if value is not None:  # a shape passed into the branch stays known there, as the lowering had it
                known[n.name] = value
            if (h.node.name, h.index) in lists:
                metas[n.name] = lists[(h.node.name, h.index)]
        return inner.run(session, data, wrap, known, metas)


def _copy(value: Any) -> Any:
    """A value crossing into the next part: an array is copied (a later in-place write must not change it); a list
    handle is passed on, as the Session passes lists between nodes (graph_ir/executors/list_store.py)."""
    return np.array(value, copy=True) if isinstance(value, np.ndarray) else value


def _wrapped(planned: Plan, wrap: Callable) -> Plan:
    return dataclasses.replace(planned, steps=[wrap(step) for step in planned.steps])


def fed_view(graph: Graph, inputs: Sequence[Any]) -> Any:
    """What Session._feeds checks a call's inputs against: the graph's Data nodes at the call's shapes, after the
    shapes are checked against their descs (a known dim, the rank) by name."""
    shapes = call_shapes(inputs)
    data = [n for n in graph.nodes.values() if n.type == "Data"]
    wanted = max((n.attrs["index"] for n in data), default=-1) + 1
    if len(shapes) != wanted:
        raise ValueError(f"graph {graph.name!r} takes {wanted} inputs (by Data index), got {len(shapes)}")
    check_call_shapes(graph, shapes)
    view = Graph(graph.name)
    fed = [view.add_node("Data", (), dict(n.attrs), name=n.name, exact_name=True, output_descs=[TensorDesc(
        "y", n.output_descs[0].dtype, shapes[n.attrs["index"]])]) for n in data]
    return SimpleNamespace(graph=view, fed=fed)
