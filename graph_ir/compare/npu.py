"""A Session's run written as CANN's dump files, and a folder of dump files (an NPU's, say) compared with the
Session node by node (by GE node name, the header's op_name)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from graph_ir.compare.dump import Dumper, read_dump_folder
from graph_ir.compare.observe import Observer, run_observed
from graph_ir.compare.report import Comparison
from graph_ir.ir.graph import Graph
from graph_ir.runtime.session import Session


def write_dumps(graph: Graph, inputs: Sequence[Any], folder: str, session: Session | None = None) -> list[str]:
    """Runs `graph` once on `inputs` (in `session`, a new one by default, as graph id 0) and writes each executor
    node's inputs and outputs into `folder` as GE's dump does; returns the files' paths, in execution order."""
    os.makedirs(folder, exist_ok=True)
    session = Session() if session is None else session
    session.add_graph(0, graph)
    try:
        dumper = Dumper(folder)
        run_observed(session, 0, inputs, dumper)
    finally:
        session.remove_graph(0)
    return dumper.written


def compare_dumps(graph: Graph, inputs: Sequence[Any], folder: str, tolerance: float = 1e-3,
                  isolated: bool = True, session: Session | None = None) -> Comparison:
    """Runs `graph` once on `inputs` (in `session`, whose variables should hold the state the dumps started from)
    and compares every GE node's outputs with its dump in `folder`, the benchmark; isolated, each node runs again on
    the dump's values of its inputs. `tolerance`: the scale error (max |Session - dump| / max |dump|) each node may
    have, one for all (the lowering table's are TF's, not the device's). The rows' TF columns hold the dump's node
    name and the GE type."""
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < float("inf"):
        raise ValueError(f"compare_dumps: tolerance must be a finite number >= 0, got {tolerance!r:.80}")
    if not isinstance(isolated, bool):
        raise TypeError(f"compare_dumps: isolated must be a bool, got {isolated!r:.80}")
    dumps = read_dump_folder(folder)
    types = {name: graph.nodes[name].type for name in dumps if name in graph.nodes}

    def benchmark(name: str, j: int):
        dump = dumps.get(name)
        return dump.outputs[j] if dump is not None and j < len(dump.outputs) else None

    observer = Observer(benchmark, types, lambda *_: float(tolerance), isolated)
    session = Session() if session is None else session
    session.add_graph(0, graph)
    try:
        run_observed(session, 0, inputs, observer)
    finally:
        session.remove_graph(0)
    return Comparison(observer.rows)
