"""`python -m graph_ir draw GRAPH.air [OUT.onnx]`: a GE graph as GE's ONNX-format graph dump, which Netron opens
(graph_ir/files/onnx_dump.py); without OUT, GRAPH.onnx beside the graph."""

from __future__ import annotations

import argparse
import os

HELP = "write a .air (or .pbtxt) graph as GE's ONNX-format graph dump (.onnx or .onnx.pbtxt), for Netron"


def add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", help="the GE graph file (.air or .pbtxt)")
    parser.add_argument("out", nargs="?", help="the dump to write: .onnx (binary) or .onnx.pbtxt (text, as GE names "
                                               "its dumps); default: the graph's name with .onnx, beside it")
    parser.add_argument("--with-data", action="store_true", help="include Consts' and Variables' bytes (GE's level 1)")


def run(args: argparse.Namespace) -> int:
    import graph_ir
    from graph_ir.files import onnx_dump

    if not os.path.isfile(args.graph):
        raise ValueError(f"graph {args.graph!r}: no such file")
    if args.out is None:
        args.out = os.path.splitext(args.graph)[0] + ".onnx"
    graph = graph_ir.load(args.graph)
    try:
        onnx_dump.write(graph.to_model_def(), args.out, with_data=args.with_data)
    except ImportError as e:  # onnx is optional: one line saying what to install, not a traceback
        raise ValueError(f"{args.out!r}: {e}") from None
    print(f"wrote {args.out}: {len(graph.nodes)} nodes, {len(graph.subgraphs)} subgraphs; open it in Netron")
    return 0
