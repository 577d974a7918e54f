"""HcomAllReduce in graph_ir.Session against bare mpi4py on the same buffers, between real processes:

    mpiexec -n 2 python -m mpi4py -m bench.bench_hcom [--sizes 1K,64K,1M,16M,64M] [--repeats 15]

Per size (bytes of float32), ways to sum one buffer over the ranks, timed in one run, interleaved round by round
(each call after a barrier, so the ranks start together; medians of rank 0's times), as ratios to MPICH's own:
- mpi_allreduce: comm.Allreduce(x, y, op=MPI.SUM), MPICH's blocking allreduce (order chosen by MPICH);
- session: run_graph of Data -> HcomAllReduce(sum) -> NetOutput in Session(group=world()): the run's fixed cost
  (checking and copying the feed, copying the result), the run's graph check (a 32-byte MPI_Iallgather posted at
  the run's start) and the collective (graph_ir/distributed/collectives.py: on two ranks MPI_Iallreduce, else the
  rank-order two-step);
- op_first, op_steady: a graph of CHAIN all-reduces one after the other, run through Session.run_graph_wrapped (the
  hook graph_ir/compare uses) timing each HcomAllReduce node as the Session executes it: the first (which also
  completes the run's graph check and absorbs the ranks' skew from the run's start), and the later ones (the
  steady cost of a collective inside a step);
- mpi_two_step: the rank-order two-step algorithm on bare mpi4py (Ialltoall, add, Iallgather), which 3 ranks or
  more, max, min and float16 use.
Prints the ratios; writes bench/results/hcom.json (milliseconds and ratios).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

SIZES = "1K,16K,256K,4M,64M"
CHAIN = 4  # all-reduces in the chained graph, whose later ones give the steady per-op cost


def _bytes(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def _two_step(comm, x: np.ndarray) -> np.ndarray:
    from mpi4py import MPI

    n = comm.Get_size()
    block = -(-x.size // n)
    flat = np.zeros(block * n, x.dtype)
    flat[:x.size] = x
    blocks = np.empty((n, block), x.dtype)
    comm.Ialltoall([flat, MPI.FLOAT], [blocks, MPI.FLOAT]).Wait()
    mine = blocks[0].copy()
    for row in blocks[1:]:
        np.add(mine, row, out=mine)
    out = np.empty(block * n, x.dtype)
    comm.Iallgather([mine, MPI.FLOAT], [out, MPI.FLOAT]).Wait()
    return out[:x.size]


def _one_size(group, graph_id: int, text: str, repeats: int) -> dict:
    """The three ways timed on a buffer of `text` bytes; the row of the table."""
    from mpi4py import MPI

    import graph_ir
    from graph_ir import ops

    comm, barrier = group.comm, MPI.COMM_WORLD
    count = max(_bytes(text) // 4, 1)
    x = np.random.default_rng(group.rank).standard_normal(count).astype(np.float32)
    graph = graph_ir.Graph(f"allreduce_{text}")
    with graph:
        graph.set_outputs([ops.HcomAllReduce(graph_ir.Data(0, "float32", (count,), name="x"), reduction="sum",
                                             group="hccl_world_group", name="ar")])
    chain = graph_ir.Graph(f"allreduce_chain_{text}")  # CHAIN all-reduces one after the other
    with chain:
        value = graph_ir.Data(0, "float32", (count,), name="x")
        for k in range(CHAIN):
            value = ops.HcomAllReduce(value, reduction="sum", group="hccl_world_group", name=f"ar{k}")
        chain.set_outputs([value])
    session = graph_ir.Session(group=group)
    session.add_graph(2 * graph_id, graph)
    session.add_graph(2 * graph_id + 1, chain)
    y = np.empty_like(x)
    op_times: dict[str, list[float]] = {f"ar{k}": [] for k in range(CHAIN)}

    def timed(step):
        if step.node.type != "HcomAllReduce":
            return step

        def run(node, args):
            start = time.perf_counter()
            out = step.run(node, args)
            op_times[node.name].append((time.perf_counter() - start) * 1e3)
            return out
        return dataclasses.replace(step, run=run)

    fns = {"session": lambda: session.run_graph(2 * graph_id, [x])[0],
           "chain": lambda: session.run_graph_wrapped(2 * graph_id + 1, [x], timed)[0],
           "mpi_allreduce": lambda: comm.Allreduce(x, y, op=MPI.SUM),
           "mpi_two_step": lambda: _two_step(comm, x)}
    repeats = repeats if count * 4 <= 16 * 2**20 else max(3, repeats // 3)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(repeats + 1):  # round 0 warms up
        for name in (list(fns) if r % 2 else list(fns)[::-1]):
            barrier.Barrier()
            start = time.perf_counter()
            fns[name]()
            if r:
                times[name].append((time.perf_counter() - start) * 1e3)
    del times["chain"]
    times["op_first"] = op_times["ar0"][1:]
    times["op_steady"] = [t for k in range(1, CHAIN) for t in op_times[f"ar{k}"][1:]]
    ms = {name: float(np.median(t)) for name, t in times.items()}
    check = session.run_graph(2 * graph_id, [x])[0]
    comm.Allreduce(x, y, op=MPI.SUM)
    return {"size": text, "bytes": count * 4, "ranks": group.size, **{f"{k}_ms": v for k, v in ms.items()},
            **{f"{k}_ratio": ms[k] / ms["mpi_allreduce"] for k in ("session", "op_first", "op_steady",
                                                                   "mpi_two_step")},
            "max_abs_diff_to_mpi": float(np.max(np.abs(check - y)))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=SIZES, help=f"buffer sizes in bytes (K, M suffixes; default {SIZES})")
    parser.add_argument("--repeats", type=int, default=15, help="timed rounds per size (fewer above 16 MB)")
    args = parser.parse_args()

    from bench.timing import save_rows
    from graph_ir.distributed import world

    group = world()
    rows = []
    for graph_id, text in enumerate(args.sizes.split(",")):
        row = _one_size(group, graph_id, text, args.repeats)
        rows.append(row)
        if group.rank == 0:
            print(f"{text:>5}: mpi allreduce {row['mpi_allreduce_ms']:8.3f} ms | session run "
                  f"{row['session_ratio']:5.2f}x  first op {row['op_first_ratio']:5.2f}x  steady op "
                  f"{row['op_steady_ratio']:5.2f}x  two-step {row['mpi_two_step_ratio']:5.2f}x  "
                  f"|session - mpi| <= {row['max_abs_diff_to_mpi']:.1e}", flush=True)
    if group.rank == 0:
        print("wrote", save_rows("hcom", rows))


if __name__ == "__main__":
    main()
