"""`python -m graph_ir ops`: the table of every TF op type graph_ir.from_tensorflow lowers, with its GE op(s).
`python -m graph_ir compare GRAPH.air DUMPS --inputs INPUTS.npz`: a folder of CANN dump files (an NPU's) compared
with graph_ir.Session node by node (`--write-dumps` writes the Session's own instead).

To see what a step of yours lacks before lowering it, call graph_ir.missing_ops(step, *specs); to compare a step
with TensorFlow node by node, graph_ir.compare.compare_step(step, *batch) (a tf.function needs its arguments to be
traced, which a command line cannot give)."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns the exit status (compare: 1 when a node departs, else 0)."""
    parser = argparse.ArgumentParser(prog="python -m graph_ir", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("ops", help="print every TF op type the lowering knows, with its GE op(s) and family")
    compare = commands.add_parser("compare", help="compare CANN dump files with graph_ir.Session, node by node")
    compare.add_argument("graph", help="the .air file the dumps are of")
    compare.add_argument("dumps", help="the folder of dump files (or, with --write-dumps, the folder to write)")
    compare.add_argument("--inputs", required=True, help="the graph's inputs, an .npz of np.savez(path, *inputs)")
    compare.add_argument("--tolerance", type=float, default=1e-3, help="the scale error a node may have (1e-3)")
    compare.add_argument("--csv", help="write the table as CSV (msaccucmp's columns) to this file")
    compare.add_argument("--no-isolated", action="store_true", help="do not run each node on the dump's inputs")
    compare.add_argument("--write-dumps", action="store_true", help="write the Session's run as dump files")
    args = parser.parse_args(argv)
    if args.command == "compare":
        return _compare(args)
    from graph_ir.lowering.report import format_op_table  # imports TensorFlow

    print(format_op_table())
    return 0


def _compare(args: argparse.Namespace) -> int:
    import numpy as np

    import graph_ir
    from graph_ir.compare import compare_dumps, write_dumps

    with np.load(args.inputs, allow_pickle=False) as npz:
        inputs = [npz[name] for name in npz.files]
    graph = graph_ir.load(args.graph)
    if args.write_dumps:
        written = write_dumps(graph, inputs, args.dumps)
        print(f"wrote {len(written)} dump files to {args.dumps}")
        return 0
    comparison = compare_dumps(graph, inputs, args.dumps, tolerance=args.tolerance, isolated=not args.no_isolated)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            f.write(comparison.to_csv())
        print(comparison.summary())
    else:
        print(comparison.format_table())
    return 1 if comparison.first_departure is not None else 0


if __name__ == "__main__":
    sys.exit(main())
