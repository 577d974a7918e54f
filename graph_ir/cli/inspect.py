"""`python -m graph_ir show GRAPH.air`: what a GE graph holds: its inputs, outputs, variables, op types and
subgraphs, and with --nodes every node with its type, output dtypes and shapes, and inputs."""

from __future__ import annotations

import argparse
import collections
import os

HELP = "show a .air or .pbtxt graph: inputs, outputs, variables, op types, subgraphs (every node with --nodes)"


def add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", help="the GE graph file (.air or .pbtxt)")
    parser.add_argument("--nodes", action="store_true", help="list every node, in execution order")


def _desc(descs) -> str:
    return ", ".join(f"{d.dtype.name}{list(d.shape)}" for d in descs) or "-"


def _describe(graph, nodes: bool, indent: str = "") -> list[str]:
    lines = [f"{indent}graph {graph.name!r}: {len(graph.nodes)} nodes"]
    data = sorted(graph.nodes_of_type("Data"), key=lambda n: n.attrs.get("index", 0))
    lines += [f"{indent}  input {n.attrs.get('index', 0)} {n.name}: {_desc(n.output_descs)}" for n in data]
    for n in graph.nodes_of_type("NetOutput"):
        lines += [f"{indent}  output {k} <- {h.node.name}:{h.index}: {_desc([h.desc])}" for k, h in enumerate(n.inputs)
                  if h is not None]
    lines += [f"{indent}  variable {n.name}: {_desc(n.output_descs)}" for n in graph.nodes_of_type("Variable")]
    counts = collections.Counter(n.type for n in graph.nodes.values())
    lines.append(f"{indent}  op types: " + ", ".join(f"{t} {c}" for t, c in sorted(counts.items())))
    if nodes:
        for n in graph.topological_order():
            sources = ", ".join(f"{h.node.name}:{h.index}" for h in n.inputs if h is not None)
            lines.append(f"{indent}  {n.name} = {n.type}({sources}) -> {_desc(n.output_descs)}")
    return lines


def run(args: argparse.Namespace) -> int:
    import graph_ir

    if not os.path.isfile(args.graph):
        raise ValueError(f"graph {args.graph!r}: no such file")
    graph = graph_ir.load(args.graph)
    lines = _describe(graph, args.nodes)
    for _, sub in sorted(graph.subgraphs.items()):
        lines += _describe(sub, args.nodes, indent="  ")
    print("\n".join(lines))
    return 0
