"""Rank programs for tests/distributed, each run as every rank of a job by tests/helpers/mpi.py:

    mpiexec -n N python -m mpi4py -m tests.helpers.hcom_ranks PROGRAM OUT_DIR

PROGRAM: collectives (one graph of every Hcom case of CASES, each rank's inputs from case_input), sgd (K
data-parallel SGD steps of sgd_graph on each rank's half of the batch), early_exit (the last rank leaves before the
run), stuck (the last rank computes for ever instead of running), mismatch (the last rank's graph reduces otherwise),
run_mismatch (the ranks run different graphs at once). Each rank writes OUT_DIR/rank{r}.npz (what it got) and, on
an error it expects, OUT_DIR/rank{r}.txt (the message). The tests recompute the expected values with NumPy.
"""

from __future__ import annotations

import functools
import os
import sys
import time

import numpy as np

W = "hccl_world_group"
_REDUCE = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}
# (name, op, dtype, rows (dim 0 per rank, or per job for ReduceScatter, a multiple of 4), attrs)
CASES = [
    *((f"ar_{r}_{d}", "HcomAllReduce", d, 6, {"reduction": r}) for r in ("sum", "prod", "max", "min")
      for d in ("float32", "int32", "float16")),
    ("ar_sum_int8", "HcomAllReduce", "int8", 5, {"reduction": "sum"}),  # wraps
    ("ar_prod_int16", "HcomAllReduce", "int16", 5, {"reduction": "prod"}),  # wraps
    ("ar_sum_f32_odd", "HcomAllReduce", "float32", 7, {"reduction": "sum"}),  # 7 x 3 elements: padded blocks
    ("ag_float32", "HcomAllGather", "float32", 3, {}),
    ("ag_int64", "HcomAllGather", "int64", 2, {}),
    ("ag_uint8", "HcomAllGather", "uint8", 1, {}),
    ("ag_float64", "HcomAllGather", "float64", 2, {}),
    ("rs_sum_float32", "HcomReduceScatter", "float32", 8, {"reduction": "sum"}),
    ("rs_max_int32", "HcomReduceScatter", "int32", 4, {"reduction": "max"}),
    ("rs_prod_float16", "HcomReduceScatter", "float16", 8, {"reduction": "prod"}),
    ("red_sum_float32", "HcomReduce", "float32", 6, {"reduction": "sum", "root_rank": 1}),
    ("red_min_int16", "HcomReduce", "int16", 6, {"reduction": "min", "root_rank": 0}),
]
BROADCAST = (("float32", (3, 2)), ("int32", (5,)), ("float16", (1,)), ("uint16", (2, 2)))
COLUMNS = 3


def case_input(name: str, dtype: str, rows: int, rank: int) -> np.ndarray:
    """Rank `rank`'s input of case `name`: products near 1, integer sums past int8, NumPy's normals otherwise."""
    rng = np.random.default_rng([sum(map(ord, name)), rank])
    shape = (rows, COLUMNS)
    if dtype.startswith(("int", "uint")):
        low, high = {"int8": (-128, 128), "int16": (-20, 20), "uint8": (0, 256)}.get(dtype, (-1000, 1000))
        return rng.integers(low, high, shape).astype(dtype)
    if "prod" in name:
        return rng.uniform(0.5, 1.5, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def reduced(reduction: str, xs: list[np.ndarray]) -> np.ndarray:
    """The ranks' values reduced in rank order, left to right: in float32 for float16 (rounded once), wrapping for
    integers (what graph_ir/distributed/collectives.py documents)."""
    dtype = xs[0].dtype
    wide = [x.astype(np.float32) for x in xs] if dtype == np.float16 else xs
    with np.errstate(all="ignore"):
        return functools.reduce(_REDUCE[reduction], wide).astype(dtype)


def expected(ranks: int, rank: int) -> dict[str, np.ndarray]:
    """What rank `rank` of `ranks` must get from the collectives program."""
    out = {}
    for name, op, dtype, rows, attrs in CASES:
        xs = [case_input(name, dtype, rows, r) for r in range(ranks)]
        if op == "HcomAllReduce":
            out[name] = reduced(attrs["reduction"], xs)
        elif op == "HcomAllGather":
            out[name] = np.concatenate(xs)
        elif op == "HcomReduceScatter":
            out[name] = np.split(reduced(attrs["reduction"], xs), ranks)[rank]
        else:
            out[name] = reduced(attrs["reduction"], xs) if rank == attrs["root_rank"] else xs[rank]
    for k in range(len(BROADCAST)):
        out[f"bc_{k}"] = _broadcast_input(k, ranks - 1)  # from the last rank
    return out


def _broadcast_input(k: int, rank: int) -> np.ndarray:
    dtype, shape = BROADCAST[k]
    x = case_input(f"bc_{k}", dtype, shape[0], rank)
    return np.ascontiguousarray(x[:, :1].reshape(shape) if len(shape) == 1 else x[:, :shape[1]])


def collectives_graph(ranks: int):
    """Every case of CASES and one HcomBroadcast of BROADCAST's list from the last rank, as one graph; its inputs in
    Data-index order."""
    import graph_ir
    from graph_ir import ops

    graph, outputs = graph_ir.Graph("collectives"), []
    with graph:
        for k, (name, op, dtype, rows, attrs) in enumerate(CASES):
            x = graph_ir.Data(k, dtype, (rows, COLUMNS), name=f"x_{name}")
            extra = {"rank_size": ranks} if op in ("HcomAllGather", "HcomReduceScatter") else {}
            outputs.append(getattr(ops, op)(x, group=W, name=name, **attrs, **extra))
        listed = [graph_ir.Data(len(CASES) + k, dtype, shape, name=f"x_bc_{k}")
                  for k, (dtype, shape) in enumerate(BROADCAST)]
        outputs += ops.HcomBroadcast(listed, root_rank=ranks - 1, group=W, name="bc")
        graph.set_outputs(outputs)
    return graph


def collectives_inputs(rank: int) -> list[np.ndarray]:
    return [case_input(name, dtype, rows, rank) for name, _, dtype, rows, _ in CASES] + \
        [_broadcast_input(k, rank) for k in range(len(BROADCAST))]


def output_names() -> list[str]:
    return [c[0] for c in CASES] + [f"bc_{k}" for k in range(len(BROADCAST))]


# The data-parallel SGD step: y ~ x @ w, loss = mean((x @ w - y)^2) over the batch, w -= LR * gradient.
DIM, OUT, GLOBAL_BATCH, LR, STEPS = 6, 2, 16, 0.1, 3


def sgd_data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(w0, x, y) of the whole batch; rank r of N takes rows r*B/N ... (r+1)*B/N."""
    rng = np.random.default_rng(46)
    return (rng.standard_normal((DIM, OUT)).astype(np.float32), rng.standard_normal((GLOBAL_BATCH, DIM)).astype(
        np.float32), rng.standard_normal((GLOBAL_BATCH, OUT)).astype(np.float32))


def sgd_graph(batch: int, ranks: int | None, reduction: str = "sum", hcom_name: str = "grad_sum"):
    """One SGD step on `batch` rows: MatMul, the loss's gradient 2/batch * x^T (x w - y), then with `ranks` the sum
    of every rank's gradient (HcomAllReduce) divided by the ranks (RealDiv), then w - LR * gradient (Sub, Assign).
    ranks None: the single-process step on the whole batch. Outputs: the new w and the loss."""
    import graph_ir
    from graph_ir import ops

    w0 = sgd_data()[0]
    graph = graph_ir.Graph("sgd")
    with graph:
        w = graph_ir.Variable("w", w0)
        x = graph_ir.Data(0, "float32", (batch, DIM), name="x")
        y = graph_ir.Data(1, "float32", (batch, OUT), name="y")
        err = ops.Sub(ops.MatMulV2(x, w), y, name="err")
        loss = ops.ReduceMean(ops.Mul(err, err), graph_ir.Const(np.array([0, 1], np.int32)), name="loss")
        grad = ops.Mul(ops.MatMulV2(x, err, transpose_x1=True), graph_ir.Const(np.float32(2.0 / (batch * OUT))),
                       name="grad")
        if ranks is not None:
            grad = ops.HcomAllReduce(grad, reduction=reduction, group=W, fusion=0, name=hcom_name)
            grad = ops.RealDiv(grad, graph_ir.Const(np.float32(ranks)), name="grad_mean")
        new = ops.Sub(w, ops.Mul(grad, graph_ir.Const(np.float32(LR))), name="step")
        graph.set_outputs([ops.Assign(w, new, name="update"), loss])
    return graph


def _world(out: str):
    import graph_ir
    from graph_ir.distributed import world

    group = world()
    return graph_ir, group, os.path.join(out, f"rank{group.rank}")


def _note(path: str, error: Exception) -> None:
    with open(path + ".txt", "w") as f:
        f.write(f"{type(error).__name__}: {error}")


def main(program: str, out: str) -> None:
    graph_ir, group, mine = _world(out)
    n, r = group.size, group.rank
    session = graph_ir.Session(group=group)
    if program == "collectives":
        graph = collectives_graph(n)
        graph.save(mine + ".air")
        session.add_graph(0, graph)
        np.savez(mine + ".npz", **dict(zip(output_names(), session.run_graph(0, collectives_inputs(r)))))
    elif program == "sgd":
        _, x, y = sgd_data()
        rows = slice(r * GLOBAL_BATCH // n, (r + 1) * GLOBAL_BATCH // n)
        graph = sgd_graph(GLOBAL_BATCH // n, n)
        graph.save(mine + ".air")
        session.add_graph(0, graph)
        losses = [session.run_graph(0, [x[rows], y[rows]])[1] for _ in range(STEPS)]
        np.savez(mine + ".npz", w=session.get_variables(["w"])[0], losses=np.array(losses))
    elif program == "renamed":  # the same collectives under other node names: they join and run
        _, x, y = sgd_data()
        session.add_graph(0, sgd_graph(GLOBAL_BATCH // n, n, hcom_name="grad_sum" if r == 0 else f"allreduce_{r}"))
        session.run_graph(0, [x[:GLOBAL_BATCH // n], y[:GLOBAL_BATCH // n]])
        np.savez(mine + ".npz", w=session.get_variables(["w"])[0])
    elif program in ("early_exit", "stuck"):
        session.add_graph(0, sgd_graph(GLOBAL_BATCH // n, n))
        if r == n - 1:
            if program == "early_exit":
                sys.exit(0)
            time.sleep(3600)  # computing for ever: the others' timeout must still end the job
        _, x, y = sgd_data()
        session.run_graph(0, [x[:GLOBAL_BATCH // n], y[:GLOBAL_BATCH // n]])
    elif program == "mismatch":
        _, x, y = sgd_data()
        session.add_graph(0, sgd_graph(GLOBAL_BATCH // n, n))
        session.run_graph(0, [x[:GLOBAL_BATCH // n], y[:GLOBAL_BATCH // n]])
        before = session.get_variables(["w"])[0]
        other = sgd_graph(GLOBAL_BATCH // n, n, "max" if r == n - 1 else "sum")
        try:
            session.add_graph(1, other)
        except graph_ir.GraphError as e:
            _note(mine, e)
        np.savez(mine + ".npz", before=before, after=session.get_variables(["w"])[0])
    elif program == "run_mismatch":
        _, x, y = sgd_data()
        session.add_graph(0, sgd_graph(GLOBAL_BATCH // n, n))
        session.add_graph(1, collectives_graph(n))
        try:
            if r == 0:
                session.run_graph(1, collectives_inputs(r))
            else:
                session.run_graph(0, [x[:GLOBAL_BATCH // n], y[:GLOBAL_BATCH // n]])
        except graph_ir.GraphError as e:
            _note(mine, e)
    else:
        raise SystemExit(f"unknown program {program!r}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
