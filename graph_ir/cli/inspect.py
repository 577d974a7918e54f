"""`python -m graph_ir show GRAPH.air`: what a GE graph holds: a summary line and its op types first, then its inputs,
outputs, variables and subgraphs, and with --nodes every node with its type, output dtypes and shapes, and inputs.
`python -m graph_ir show SAVED_MODEL`: the SavedModel's signatures, each input's and output's name, dtype and shape
(the names --input_shape wants, e.g. Keras's keras_tensor_156), read from its saved_model.pb without loading it."""

from __future__ import annotations

import argparse
import collections
import os

HELP = ("show a .air or .pbtxt graph (op types, inputs, outputs, variables, subgraphs; every node with --nodes), or a "
        "SavedModel's signatures with their input names, dtypes and shapes")


def add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", help="the GE graph file (.air or .pbtxt), or a SavedModel directory")
    parser.add_argument("--nodes", action="store_true", help="list every node, in execution order")


def _desc(descs) -> str:
    return ", ".join(f"{d.dtype.name}{list(d.shape)}" for d in descs) or "-"


def _describe(graph, nodes: bool, indent: str = "") -> list[str]:
    """The summary (counts, op types) first, then inputs, outputs, variables (hundreds in a CNN), and nodes."""
    variables = graph.nodes_of_type("Variable")
    lines = [(f"{indent}graph {graph.name!r}: {len(graph.nodes)} nodes, {len(variables)} variables, "
              f"{len(graph.subgraphs)} subgraphs")]
    counts = collections.Counter(n.type for n in graph.nodes.values())
    lines.append(f"{indent}  op types: " + ", ".join(f"{t} {c}" for t, c in sorted(counts.items())))
    data = sorted(graph.nodes_of_type("Data"), key=lambda n: n.attrs.get("index", 0))
    lines += [f"{indent}  input {n.attrs.get('index', 0)} {n.name}: {_desc(n.output_descs)}" for n in data]
    for n in graph.nodes_of_type("NetOutput"):
        lines += [f"{indent}  output {k} <- {h.node.name}:{h.index}: {_desc([h.desc])}" for k, h in enumerate(n.inputs)
                  if h is not None]
    lines += [f"{indent}  variable {n.name}: {_desc(n.output_descs)}" for n in variables]
    if nodes:
        for n in graph.topological_order():
            sources = ", ".join(f"{h.node.name}:{h.index}" for h in n.inputs if h is not None)
            lines.append(f"{indent}  {n.name} = {n.type}({sources}) -> {_desc(n.output_descs)}")
    return lines


def _tensor(info) -> str:
    """A TensorInfo as dtype[d0, d1] (-1: a dim known only at run time, as --input_shape writes it)."""
    from tensorflow.python.framework import dtypes

    shape = "[...]" if info.tensor_shape.unknown_rank else str([d.size for d in info.tensor_shape.dim])
    return f"{dtypes.as_dtype(info.dtype).name}{shape}"


def _saved_model(path: str) -> list[str]:
    """Each signature of the SavedModel at `path`, with its inputs and outputs, and the convert command for it."""
    from graph_ir.cli.tf_quiet import import_tensorflow

    import_tensorflow()
    from google.protobuf import text_format
    from tensorflow.core.protobuf import saved_model_pb2

    model = saved_model_pb2.SavedModel()
    binary = os.path.join(path, "saved_model.pb")
    try:
        if os.path.isfile(binary):
            with open(binary, "rb") as f:
                model.ParseFromString(f.read())
        else:
            with open(os.path.join(path, "saved_model.pbtxt")) as f:
                text_format.Parse(f.read(), model)
    except (OSError, text_format.ParseError, ValueError) as e:
        raise ValueError(f"SavedModel {path!r}: its saved_model.pb cannot be read: {e}") from None
    signatures = {name: sig for meta in model.meta_graphs for name, sig in meta.signature_def.items()
                  if not name.startswith("__")}
    plural = "s" * (len(signatures) != 1)
    lines = [(f"SavedModel {path!r}: {len(signatures)} signature{plural} (a dim -1 is known only at run time: give "
              "it with convert's --input_shape)")]
    for name, sig in sorted(signatures.items()):
        lines.append(f"  signature {name!r}:")
        lines += [f"    input {key}: {_tensor(info)}" for key, info in sorted(sig.inputs.items())]
        lines += [f"    output {key}: {_tensor(info)}" for key, info in sorted(sig.outputs.items())]
        shapes = ";".join(f"{key}:" + ",".join(str(d.size) for d in info.tensor_shape.dim)
                          for key, info in sorted(sig.inputs.items()) if not info.tensor_shape.unknown_rank)
        unknown = any(d.size < 0 for info in sig.inputs.values() for d in info.tensor_shape.dim)
        lines.append(f"    convert: python -m graph_ir convert {path} OUT.air --signature {name}" +
                     (f' --input_shape "{shapes}"' if unknown else ""))
    if not signatures:
        lines.append("  no signatures: give a tf.function saved as an attribute with --signature NAME")
    return lines


def run(args: argparse.Namespace) -> int:
    if os.path.isdir(args.graph):
        if not any(os.path.isfile(os.path.join(args.graph, f)) for f in ("saved_model.pb", "saved_model.pbtxt")):
            raise ValueError(f"{args.graph!r}: a directory without saved_model.pb (neither a graph nor a SavedModel)")
        print("\n".join(_saved_model(args.graph)))
        return 0
    import graph_ir

    if not os.path.isfile(args.graph):
        raise ValueError(f"graph {args.graph!r}: no such file")
    graph = graph_ir.load(args.graph)
    lines = _describe(graph, args.nodes)
    for _, sub in sorted(graph.subgraphs.items()):
        lines += _describe(sub, args.nodes, indent="  ")
    print("\n".join(lines))
    return 0
