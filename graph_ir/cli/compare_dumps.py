"""`python -m graph_ir compare GRAPH.air DUMPS --inputs INPUTS.npz`: a folder of CANN dump files (an NPU's) compared
with graph_ir.Session node by node (`--write-dumps` writes the Session's own instead). A TF step is compared from
Python (graph_ir.compare.compare_step): a command line cannot trace a tf.function.

A rank's graph of a data-parallel job (Hcom ops) is compared under `mpiexec -n N python -m graph_ir compare ...`,
every rank at once, "{rank}" in the graph, dumps, --inputs and --csv paths standing for the rank."""

from __future__ import annotations

import argparse

from graph_ir.cli import arrays

HELP = "compare CANN dump files with graph_ir.Session, node by node (exit 1 when a node departs)"


def add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", help="the .air file the dumps are of")
    parser.add_argument("dumps", help="the folder of dump files (or, with --write-dumps, the folder to write)")
    parser.add_argument("--inputs", required=True, help="the graph's inputs, an .npz of np.savez(path, *inputs)")
    parser.add_argument("--tolerance", type=float, default=1e-3, help="the scale error a node may have (1e-3)")
    parser.add_argument("--csv", help="write the table as CSV (msaccucmp's columns) to this file")
    parser.add_argument("--no-isolated", action="store_true", help="do not run each node on the dump's inputs")
    parser.add_argument("--write-dumps", action="store_true", help="write the Session's run as dump files")
    parser.add_argument("--all-rows", action="store_true",
                        help="print every row (by default the rows not ok, then how many others)")
    parser.add_argument("--wide", action="store_true", help="print every column, names uncut")


def run(args: argparse.Namespace) -> int:
    import graph_ir
    from graph_ir.cli.run_graph import load_for_rank
    from graph_ir.compare import compare_dumps, write_dumps

    graph, group, rank = load_for_rank(args.graph)
    args.dumps, args.inputs = args.dumps.replace("{rank}", rank), args.inputs.replace("{rank}", rank)
    args.csv = args.csv.replace("{rank}", rank) if args.csv else args.csv
    session = graph_ir.Session(group=group)
    inputs = list(arrays.load_npz(args.inputs).values())
    data = sorted(graph.nodes_of_type("Data"), key=lambda n: n.attrs.get("index", 0))
    if len(inputs) == len(data):  # a wrong count is the Session's to name
        arrays.check_dtypes(data, inputs, [f"{args.inputs!r} array {k}" for k in range(len(inputs))])
    if args.write_dumps:
        written = write_dumps(graph, inputs, args.dumps, session=session)
        print(f"wrote {len(written)} dump files to {args.dumps}")
        return 0
    comparison = compare_dumps(graph, inputs, args.dumps, tolerance=args.tolerance, isolated=not args.no_isolated,
                               session=session)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            f.write(comparison.to_csv())
        print(comparison.summary())
    else:
        print(comparison.format_table(wide=args.wide, ok_rows=args.all_rows))
    return 1 if comparison.first_departure is not None else 0
