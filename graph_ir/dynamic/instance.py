"""A template graph at one call's shapes: each node added again through Graph.add_node, so that its outputs are
inferred and checked at those shapes, with the shape plumbing (Shape of an input, its slices and products) folded into
the Consts that a static lowering would have made (graph_ir/executors/folding.py). The instance is a static graph
that the Session plans and runs as any other; names, attributes and Variables are the template's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from graph_ir.dynamic.probe import PROBES
from graph_ir.executors.folding import fold_values, known_value, popped_constant, replace_by_consts
from graph_ir.ir.errors import GraphError
from graph_ir.ir.graph import NET_OUTPUT, Graph
from graph_ir.ir.nodes import Handle, Node, TensorDesc
from graph_ir.opset import control
from graph_ir.opset.conv import with_padding_pads

FED = ("Data", "RefData")


def is_template(graph: Graph) -> bool:
    """Whether the graph (or a subgraph) has a dim known only at run time (-1) in a desc."""
    return any(not d.is_static for g in (graph, *graph.subgraphs.values()) for n in g.nodes.values()
               for d in n.output_descs)


def check_template(template: Graph) -> None:
    """Instantiates a template read from a file at both probe sizes (graph_ir/dynamic/probe.py): every node must be
    inferred to its stated descs there (equal wherever a dim is known), or a GraphError names it and the field."""
    for probe in PROBES:
        try:
            instance = _instance(template, lambda node, size=probe: _with_shape(
                node, [size if d < 0 else d for d in node.output_descs[0].shape]), probe)
        except GraphError as e:
            raise GraphError(f"graph {template.name!r} with its unknown dims at {probe}: {e}") from None
        for graph in (template, *template.subgraphs.values()):
            made = instance if graph is template else instance.subgraphs[graph.name]
            for name, node in graph.nodes.items():
                for k, (want, got) in enumerate(zip(node.output_descs, made.nodes[name].output_descs)):
                    if len(want.shape) != len(got.shape) or want.dtype != got.dtype or any(
                            w >= 0 and w != g for w, g in zip(want.shape, got.shape)):
                        raise GraphError(f"{node.type} {name!r}: output_desc[{k}] says {want.dtype}"
                                         f"{list(want.shape)}, but with the unknown dims at {probe} the node "
                                         f"produces {got.dtype}{list(got.shape)}")


def call_shapes(inputs: Sequence[Any]) -> list[tuple[int, ...]]:
    """The shapes of a call's inputs (a ragged nested list is a ValueError naming the input)."""
    shapes = []
    for k, value in enumerate(inputs):
        try:
            shapes.append(tuple(int(d) for d in np.shape(value)))
        except (ValueError, TypeError) as e:  # a ragged nested list
            raise ValueError(f"input {k} is not an array of one shape and dtype: {e}") from None
    return shapes


def check_call_shapes(graph: Graph, shapes: Sequence[tuple[int, ...]]) -> None:
    """Refuses a call whose input shapes contradict the template's Data descs: the rank, or a known dim; a
    ValueError names the input and the dim. (Inputs whose unknown dims must agree are checked when instantiating.)"""
    for node in graph.nodes.values():
        if node.type not in FED:
            continue
        index, want = node.attrs["index"], node.output_descs[0].shape
        got = tuple(shapes[index])
        if len(got) != len(want):
            raise ValueError(f"input {index} ({node.name}) has shape {list(got)}: rank {len(got)}, but the graph's "
                             f"Data desc {list(want)} has rank {len(want)}")
        for k, (g, w) in enumerate(zip(got, want)):
            if w >= 0 and g != w:
                raise ValueError(f"input {index} ({node.name}) has shape {list(got)}: dim {k} is {g}, but the "
                                 f"graph's Data desc {list(want)} says {w}")


def instantiate(template: Graph, shapes: Sequence[tuple[int, ...]]) -> Graph:
    """The static graph of `template` at the input shapes `shapes` (by Data index); a GraphError names the node
    whose inputs do not fit at those shapes."""
    check_call_shapes(template, shapes)
    graph = _instance(template, lambda node: _with_shape(node, shapes[node.attrs["index"]]))
    graph._variable_names = dict(template._variable_names)
    graph._flat_parts = dict(template._flat_parts)
    graph.frozen_variables = dict(template.frozen_variables)
    return graph


def part_input_name(key: tuple[str, int]) -> str:
    """The Data node that feeds output `key` (node, output) of an earlier part to a part (instantiate_part)."""
    return key[0] if key[1] == 0 else f"{key[0]}/part_input_{key[1]}"


def instantiate_part(template: Graph, sources: Sequence[Node], nodes: Sequence[Node],
                     externals: dict[tuple[str, int], TensorDesc], aliases: dict[tuple[str, int], str],
                     outputs: Sequence[tuple[str, int]], known: dict[tuple[str, int], Any] | None = None) -> Graph:
    """`nodes` of `template` (in a run order) as a static graph: each value they take from outside them
    (`externals`: (node, output) -> its desc at this run) becomes a Data node, indexed in the order of `externals`
    and named by part_input_name; `sources` (Variables, Consts) are added first, and an in-place op's result in
    `aliases` is read as its Variable (by name); `outputs` become the NetOutput; an external in `known` holds that
    value (a shape passed into a branch), as the lowering knew it (graph_ir/runtime/segments.py runs a graph part by
    part around its Where nodes)."""
    graph = Graph(template.name)
    handles: dict[tuple[str, int], Handle] = {}
    for index, (key, desc) in enumerate(externals.items()):
        handles[key] = graph.add_node("Data", (), {"index": index}, name=part_input_name(key), exact_name=True,
                                      output_descs=[TensorDesc("y", desc.dtype, desc.shape, desc.list_meta)]).output(0)
        if known and key in known:
            handles[key].node.known_values = [known[key]]
    _add_nodes(graph, sources, handles, lambda node: node.output_descs[0])
    handles.update((key, handles[(source, 0)]) for key, source in aliases.items())
    _add_nodes(graph, nodes, handles, lambda node: node.output_descs[0])
    graph.add_node(NET_OUTPUT, [handles[key] for key in outputs])
    graph.outputs = list(graph.nodes[NET_OUTPUT].inputs)
    return graph


def _instance(template: Graph, desc_of, probe: int | None = None, known: Sequence[Any] = ()) -> Graph:
    graph = Graph(template.name)
    _add_nodes(graph, list(template.nodes.values()), {}, desc_of, probe, known)
    if NET_OUTPUT in graph.nodes:
        graph.outputs = list(graph.nodes[NET_OUTPUT].inputs)
    return graph


def _add_nodes(graph: Graph, nodes: Sequence[Node], handles: dict[tuple[str, int], Handle], desc_of,
               probe: int | None = None, known: Sequence[Any] = ()) -> None:
    """Adds `nodes` again (their inputs' handles in `handles`), Data nodes at desc_of(node) and holding the values
    `known` by index; what can be computed is folded into Consts."""
    for node in nodes:
        name = node.name
        inputs = [None if h is None else handles[(h.node.name, h.index)] for h in node.inputs]
        controls = [graph.nodes[c.name] for c in node.control_inputs if c.name in graph.nodes]
        if node.type in FED:
            made = graph.add_node(node.type, (), dict(node.attrs), name=name, exact_name=True,
                                  output_descs=[desc_of(node)])
            index = node.attrs["index"]
            if index < len(known) and known[index] is not None:
                made.known_values = [known[index]]
        elif node.op.outputs_from == "valued":  # checked at a probe size (check_template)
            if probe is None:
                raise GraphError(f"{node.type} {name!r}: its output sizes depend on values; graph_ir.Session runs it "
                                 "between the parts of the graph (graph_ir/runtime/segments.py)")
            made = graph.add_node(node.type, inputs, dict(node.attrs), name=name, control_inputs=controls,
                                  exact_name=True, output_descs=[_with_shape(
                                      node, [probe if d < 0 else d for d in node.output_descs[0].shape])])
        elif node.subgraph_graphs:
            made = _functional(graph, node, inputs, controls, probe)
        else:
            attrs = with_padding_pads(node.op, name, inputs, dict(node.attrs))  # SAME pads at these sizes
            made = graph.add_node(node.type, inputs, attrs, name=name, control_inputs=controls,
                                  exact_name=name != NET_OUTPUT)
            values = fold_values(made) if name != NET_OUTPUT else None
            made.known_values = popped_constant(made) if values is None else None
            if values is not None:
                folded = replace_by_consts(graph, made, values)
                outs = folded if isinstance(folded, list) else [folded.output(0)]
                for h in outs:
                    h.node.origins = list(node.origins)
                handles.update(((name, k), h) for k, h in enumerate(outs))
                continue
        made.origins = list(node.origins)
        handles.update(((name, k), made.output(k)) for k in range(len(made.output_descs)))


def _functional(graph: Graph, node: Node, inputs: list[Handle | None], controls: list[Node],
                probe: int | None) -> Node:
    """An If, Case or While with its subgraphs instantiated at the shapes of the inputs they are passed."""
    params = [h.desc for h in inputs[control.data_offset(node.type):] if h is not None]

    def param_desc(data: Node) -> TensorDesc:
        index = data.attrs["index"]
        if index >= len(params):
            raise GraphError(f"{node.type} {node.name!r}: its subgraph's Data {data.name!r} has index {index}, but "
                             f"it passes {len(params)} inputs")
        return params[index].renamed(data.output_descs[0].name)  # a list's handle keeps what it holds

    # A value known here is known in a branch, as the lowering had it (a shape passed into it), and in a loop if no
    # iteration changes it.
    values = [known_value(h) for h in inputs[control.data_offset(node.type):] if h is not None]
    if node.type in control.WHILE_OPS:  # only what no iteration changes
        body = control.passed_through(node.subgraph_graphs[1])
        values = [v if body.get(i) == i else None for i, v in enumerate(values)]
    subgraphs = [_instance(g, param_desc, probe, values) for g in node.subgraph_graphs]
    given = None
    if probe is not None and node.type not in control.WHILE_OPS and control.branch_sizes_differ(subgraphs):
        # Branches whose sizes differ by their values (a Where in one): at the probe size where they differ, as the
        # lowering gave them (graph_ir/opset/control.py infer_functional).
        given = [_with_shape(node, [probe if d < 0 else d for d in desc.shape], k)
                 for k, desc in enumerate(node.output_descs)]
    return graph.add_node(node.type, inputs, dict(node.attrs), name=node.name, control_inputs=controls,
                          exact_name=True, subgraphs=subgraphs, output_descs=given)


def _with_shape(node: Node, shape, output: int = 0) -> TensorDesc:
    desc = node.output_descs[output]
    return TensorDesc(desc.name, desc.dtype, tuple(int(d) for d in shape))


def describe_call(template: Graph, shapes: Sequence[Any]) -> str:
    """The call's input shapes by Data name, for an error."""
    names = {n.attrs["index"]: n.name for n in template.nodes.values() if n.type in FED}
    return ", ".join(f"{names.get(k, k)} {list(s)}" for k, s in enumerate(shapes))
