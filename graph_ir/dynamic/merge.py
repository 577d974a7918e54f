"""The template of a step lowered twice, its unknown dims at each of the two probe sizes (graph_ir/dynamic/probe.py).

The two graphs must be the same graph: the same nodes, types, edges, attributes and Const values, and output descs
of the same dtype and rank. A dim that differs between them is -1 in the template. Anything else that differs means
a lowering baked a size known only at run time into the graph (a Const of the batch size, an attribute computed from
a sequence length); that node is refused by name, never kept at one probe's size."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graph_ir.dynamic.template import add_template_node
from graph_ir.ir.errors import GraphError
from graph_ir.ir.graph import NET_OUTPUT, Graph
from graph_ir.ir.nodes import Node, TensorDesc, join_lists, joined


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        x, y = np.asarray(x), np.asarray(y)
        return x.dtype == y.dtype and x.shape == y.shape and (
            np.array_equal(x, y, equal_nan=x.dtype.kind in "fc") if x.dtype.kind in "fc" else np.array_equal(x, y))
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True  # NaN attributes
    return type(x) is type(y) and x == y


def _baked(node: Node, what: str) -> GraphError:
    return GraphError(f"{node.type} {node.name!r}: {what} depends on the size of a dim known only at run time; "
                      "graph_ir cannot keep it for every size (trace the step with that dim given)")


def _edges(node: Node) -> list:
    return [None if h is None else (h.node.name, h.index) for h in node.inputs]


def _merged_desc(node: Node, k: int, a: TensorDesc, b: TensorDesc) -> TensorDesc:
    if a.dtype != b.dtype or len(a.shape) != len(b.shape):
        raise _baked(node, f"output {k}'s dtype or rank ({a.dtype}{list(a.shape)} at one size, "
                           f"{b.dtype}{list(b.shape)} at the other)")
    return TensorDesc(a.name, a.dtype, joined(a.shape, b.shape), join_lists(a.list_meta, b.list_meta))


def _check_same(a: Node, b: Node | None) -> None:
    if b is None or b.type != a.type:
        raise _baked(a, "the node itself (it is " + ("missing" if b is None else f"a {b.type}") + " at the other size)")
    if _edges(a) != _edges(b) or [c.name for c in a.control_inputs] != [c.name for c in b.control_inputs]:
        raise _baked(a, "which inputs it takes")
    if a.attrs.keys() != b.attrs.keys() or len(a.output_descs) != len(b.output_descs):
        raise _baked(a, "its attributes")
    for key in a.attrs:
        if key == "pads" and a.attrs.get("padding") is not None:
            continue  # recomputed from `padding` at each size (graph_ir/opset/conv.py with_padding_pads)
        if not _same(a.attrs[key], b.attrs[key]):
            raise _baked(a, "its value" if key == "value" and a.type == "Const" else f"attribute {key!r}")
    if [g.name for g in a.subgraph_graphs] != [g.name for g in b.subgraph_graphs]:
        raise _baked(a, "its subgraphs")


def _merge_graph(a: Graph, b: Graph) -> Graph:
    out = Graph(a.name)
    if list(a.nodes) != list(b.nodes):
        extra = next((n for n in a.nodes if n not in b.nodes), None) or next(n for n in b.nodes if n not in a.nodes)
        node = a.nodes.get(extra) or b.nodes[extra]
        raise _baked(node, "whether the node is there")
    for name, x in a.nodes.items():
        y = b.nodes[name]
        _check_same(x, y)
        subgraphs = [_merge_graph(gx, gy) for gx, gy in zip(x.subgraph_graphs, y.subgraph_graphs)]
        inputs = [None if h is None else out.nodes[h.node.name].output(h.index) for h in x.inputs]
        descs = [_merged_desc(x, k, dx, dy) for k, (dx, dy) in enumerate(zip(x.output_descs, y.output_descs))]
        made = add_template_node(out, x.type, inputs, dict(x.attrs), name=name,
                                 control_inputs=[out.nodes[c.name] for c in x.control_inputs], output_descs=descs,
                                 subgraphs=subgraphs)
        made.origins = list(x.origins)
    if NET_OUTPUT in out.nodes:
        out.outputs = list(out.nodes[NET_OUTPUT].inputs)
    return out


def merge(a: Graph, b: Graph) -> Graph:
    """The template of graphs `a` and `b`, one step lowered at the two probe sizes (see the module docstring); a
    GraphError names the first node that differs otherwise than in its dims."""
    template = _merge_graph(a, b)
    template._variable_names = dict(a._variable_names)
    template._flat_parts = dict(a._flat_parts)
    template.frozen_variables = dict(a.frozen_variables)
    return template
