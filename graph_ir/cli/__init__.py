"""`python -m graph_ir VERB ...`: the command line Ascend users expect beside ATC.

  convert   a SavedModel to a .air (or .pbtxt) GE graph, with --input_shape and --signature as ATC takes them
  missing   what a SavedModel's signature has that the lowering cannot take, all at once
  run       a .air on .npy / .npz inputs; writes the outputs (.npz) and prints them with --print
  show      a graph's inputs, outputs, variables, op types and subgraphs (every node with --nodes)
  draw      a graph as GE's ONNX-format graph dump (.onnx), which Netron opens
  compare   an NPU's CANN dump files against the Session, node by node (exit 1 when a node departs)
  ops       every TF op type the lowering knows, with its GE op(s)

Exit status: 0 done; 1 the answer is no (`missing` found ops the lowering cannot take, `compare` a node that
departs); 2 the command line or an
input is wrong (a missing file, a bad shape string, an unknown signature, a graph that cannot be lowered or run),
said in one line on stderr naming the file, argument or node."""

from __future__ import annotations

import argparse
import sys

from graph_ir.cli import compare_dumps, convert, draw, inspect, ops_table, run_graph, tf_quiet
from graph_ir.ir.errors import GraphError

VERBS = {"convert": convert, "missing": convert.Missing, "run": run_graph, "show": inspect, "draw": draw,
         "compare": compare_dumps, "ops": ops_table}


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns the exit status (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m graph_ir", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:]))
    commands = parser.add_subparsers(dest="command", required=True)
    for name, verb in VERBS.items():
        verb.add(commands.add_parser(name, help=verb.HELP, description=verb.HELP))
    args = parser.parse_args(argv)
    tf_quiet.quiet_environment()  # TF_CPP_MIN_LOG_LEVEL=2 unless set, before any verb imports TensorFlow
    try:
        return VERBS[args.command].run(args)
    except (GraphError, OSError, ValueError, KeyError) as e:  # LoweringError is a GraphError
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"python -m graph_ir {args.command}: error: {message}", file=sys.stderr)
        return 2
