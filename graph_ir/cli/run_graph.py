"""`python -m graph_ir run GRAPH.air --inputs ...`: a GE graph run in graph_ir.Session on .npy / .npz inputs; the
outputs written to an .npz (output_0, output_1, ...) and, with --print, printed.

A graph with Hcom ops runs as one rank of a data-parallel job: start it with `mpiexec -n N python -m graph_ir run
...`; its session joins graph_ir.distributed.world(), and "{rank}" in the graph, --inputs and --out paths is the
rank (each rank its own graph file, inputs and outputs; docs/distributed.md)."""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np

from graph_ir.cli import arrays

HELP = "run a .air (or .pbtxt) graph in graph_ir.Session on .npy/.npz inputs; write (and print) its outputs"


def add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", help="the GE graph file (.air or .pbtxt)")
    parser.add_argument("--inputs", nargs="*", default=[],
                        help="one .npz holding every input (by Data name, or arr_0, arr_1, ... by index), or one .npy "
                             "per input in index order")
    parser.add_argument("--out", help="write the outputs to this .npz (output_0, output_1, ...)")
    parser.add_argument("--print", action="store_true", help="print each output")
    parser.add_argument("--steps", type=int, default=1, help="run the graph this many times (its variables carry on)")


def _inputs(graph, paths: list[str]) -> list[np.ndarray]:
    """The graph's inputs in Data-index order, read without pickles (graph_ir/cli/arrays.py), dtypes checked."""
    data = sorted(graph.nodes_of_type("Data"), key=lambda n: n.attrs.get("index", 0))
    if len(paths) == 1 and paths[0].endswith(".npz"):
        npz = arrays.load_npz(paths[0])
        keys = [n.name if n.name in npz else f"arr_{k}" for k, n in enumerate(data)]
        absent = [k for k in keys if k not in npz]
        if absent:
            raise ValueError(f"inputs {paths[0]!r}: no array {absent[0]!r}; the graph's inputs are "
                             f"{[n.name for n in data]} (name them so, or save them in order with np.savez)")
        found = [npz[k] for k in keys]
        arrays.check_dtypes(data, found, [f"{paths[0]!r} array {k!r}" for k in keys])
        return found
    if len(paths) != len(data):
        raise ValueError(f"the graph takes {len(data)} inputs {[n.name for n in data]}; got {len(paths)} files")
    for path in paths:
        if not path.endswith(".npy"):
            raise ValueError(f"input {path!r}: give .npy files (one per input) or a single .npz")
    found = [arrays.load_npy(path) for path in paths]
    arrays.check_dtypes(data, found, [repr(path) for path in paths])
    return found


def load_for_rank(path: str) -> tuple[Any, Any, str]:
    """(the graph, its group or None, the rank as text) of a .air path that may say "{rank}" (each rank its own
    file, as graph_ir.from_distributed saves them): a graph with Hcom nodes, or a path with "{rank}", runs as one
    rank of the MPI job (graph_ir.distributed.world())."""
    import graph_ir
    from graph_ir.distributed.runs import hcom_nodes, world

    group = world() if "{rank}" in path else None
    path = path.replace("{rank}", str(group.rank)) if group is not None else path
    if not os.path.isfile(path):
        raise ValueError(f"graph {path!r}: no such file")
    graph = graph_ir.load(path)
    if group is None and hcom_nodes(graph):
        group = world()
    return graph, group, "0" if group is None else str(group.rank)


def run(args: argparse.Namespace) -> int:
    import graph_ir

    if args.steps < 1:
        raise ValueError(f"--steps {args.steps}: at least 1")
    graph, group, rank = load_for_rank(args.graph)
    inputs = _inputs(graph, [p.replace("{rank}", rank) for p in args.inputs])
    session = graph_ir.Session(group=group)
    session.add_graph(0, graph)
    for _ in range(args.steps):
        outputs = session.run_graph(0, inputs)
    if args.out:
        np.savez(args.out.replace("{rank}", rank), **{f"output_{k}": np.asarray(x) for k, x in enumerate(outputs)})
    for k, x in enumerate(outputs):
        x = np.asarray(x)
        head = ("" if group is None else f"rank {rank}: ") + f"output_{k}: {x.dtype.name}{list(x.shape)}"
        print(head + (f"\n{np.array2string(x, threshold=64)}" if args.print else ""))
    return 0
