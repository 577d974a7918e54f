"""Rank programs for tests/distributed/test_hccl_tf_ops.py: tf_plugin.hccl's TF collectives (Ascend's TF adapter API)
as CPU ranks, each run as every rank of a job by tests/helpers/mpi.py:

    mpiexec -n N python -m mpi4py -m tests.helpers.hccl_tf_ranks values OUT_DIR

values: every case of CASES in one tf.function (the collectives chained by TF's automatic control dependencies),
an eager allreduce, a broadcast of a list, the gradient of sum(allreduce(x * x)) (2 N x), then the refusals of
ERRORS (each an eager call), then one more allreduce (the group still works).
mismatch: rank N-1 all-reduces with "max" where the others use "sum": every rank fails (the collectives' signatures
differ) and writes its error to OUT_DIR/rank{r}.txt.
early_exit: rank N-1 leaves before the collective; the others time out (GRAPH_IR_HCOM_TIMEOUT), naming the op
(their errors in OUT_DIR/rank{r}.txt too). Rank r writes OUT_DIR/rank{r}.npz (what it got) and OUT_DIR/rank{r}.json (the error
messages, and whether each collective of the tf.function has the previous one among its control inputs).
The training programs (the ported script, its lowering) are tests/helpers/hccl_tf_training.py.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from tests.helpers.hcom_ranks import case_input, reduced

# (name, wrapper, dtype, rows per rank (ReduceScatter: per job), reduction)
CASES = [
    *((f"ar_{r}_{d}", "allreduce", d, 7, r) for r in ("sum", "prod", "max", "min")
      for d in ("float32", "float16", "int32")),
    *((f"ag_{d}", "allgather", d, 3, None) for d in ("float32", "float16", "int32")),
    ("ag_empty", "allgather", "float32", 0, None),
    *((f"rs_{r}_{d}", "reduce_scatter", d, 6, r) for r in ("sum", "max") for d in ("float32", "float16", "int32")),
]
BROADCAST = (("float32", (3, 2)), ("int32", (5,)), ("float16", (1,)))
ROOT = 1
ERRORS = ("rank_size", "reduction", "dtype_ge", "dtype_tf", "root_rank", "dim0")


def value(name: str, dtype: str, rows: int, rank: int) -> np.ndarray:
    """Rank `rank`'s input of case `name`: tests/helpers/hcom_ranks.py's (negatives; integer sums past int8) with
    every fifth element zero."""
    x = case_input(name, dtype, rows, rank).copy()
    x.reshape(-1)[::5] = 0
    return x


def broadcast_value(k: int, rank: int) -> np.ndarray:
    dtype, shape = BROADCAST[k]
    return (np.arange(np.prod(shape)).reshape(shape) * (rank + 1) - 2).astype(dtype)


def expected(ranks: int, rank: int) -> dict[str, np.ndarray]:
    """What rank `rank` of `ranks` must get: the engine's documented order (graph_ir/distributed/collectives.py)."""
    out = {}
    for name, fn, dtype, rows, reduction in CASES:
        xs = [value(name, dtype, rows, r) for r in range(ranks)]
        if fn == "allreduce":
            out[name] = reduced(reduction, xs)
        elif fn == "allgather":
            out[name] = np.concatenate(xs)
        else:
            out[name] = np.split(reduced(reduction, xs), ranks)[rank]
    out["eager"] = reduced("sum", [value("eager", "float32", 5, r) for r in range(ranks)])
    out["after_errors"] = out["eager"]
    out["grad"] = 2 * ranks * value("eager", "float32", 5, rank)
    for k in range(len(BROADCAST)):
        out[f"bc_{k}"] = broadcast_value(k, ROOT)
    return out


def _errors(hccl_ops, tf, size: int) -> dict[str, str]:
    """Each refusal's message (every rank refuses before any collective: the group stays in step)."""
    x = tf.constant(np.ones((3, 2), np.float32))
    calls = {"rank_size": lambda: hccl_ops.allgather(x, size + 1),
             "reduction": lambda: hccl_ops.allreduce(x, "mean"),
             "dtype_ge": lambda: hccl_ops.allreduce(tf.cast(x, tf.bfloat16), "sum"),
             "dtype_tf": lambda: hccl_ops.allreduce(tf.cast(x, tf.float64), "sum"),
             "root_rank": lambda: hccl_ops.broadcast([x], root_rank=size),
             "dim0": lambda: hccl_ops.reduce_scatter(x, "sum", size)}
    messages = {}
    for name in ERRORS:
        try:
            calls[name]()
            messages[name] = "(no error)"
        except Exception as e:  # noqa: BLE001 - the test reads the message
            messages[name] = f"{type(e).__name__}: {e}"
    return messages


def values(out: str) -> None:
    import tensorflow as tf

    from graph_ir.distributed import world
    from tf_plugin.hccl import hccl_ops

    group = world()
    rank, size = group.rank, group.size
    inputs = [value(name, dtype, rows, rank) for name, _, dtype, rows, _ in CASES]

    @tf.function
    def everything(*xs):
        got = []
        for (name, fn, _, _, reduction), x in zip(CASES, xs):
            if fn == "allreduce":
                got.append(hccl_ops.allreduce(x, reduction))
            elif fn == "allgather":
                got.append(hccl_ops.allgather(x, size))
            else:
                got.append(hccl_ops.reduce_scatter(x, reduction, size))
        return got + hccl_ops.broadcast([broadcast_value(k, rank) for k in range(len(BROADCAST))], root_rank=ROOT)

    results = [t.numpy() for t in everything(*inputs)]
    graph = everything.get_concrete_function(*inputs).graph
    hcom = [op for op in graph.get_operations() if op.type.startswith("Hcom")]
    chained = all(hcom[k - 1] in hcom[k].control_inputs for k in range(1, len(hcom)))
    got = {name: r for (name, *_), r in zip(CASES, results)}
    got.update({f"bc_{k}": results[len(CASES) + k] for k in range(len(BROADCAST))})
    got["eager"] = hccl_ops.allreduce(tf.constant(value("eager", "float32", 5, rank)), "sum").numpy()
    x = tf.Variable(value("eager", "float32", 5, rank))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(hccl_ops.allreduce(x * x, "sum"))
    got["grad"] = tape.gradient(loss, x).numpy()
    messages = _errors(hccl_ops, tf, size)
    got["after_errors"] = hccl_ops.allreduce(tf.constant(value("eager", "float32", 5, rank)), "sum").numpy()
    np.savez(os.path.join(out, f"rank{rank}.npz"), **got)
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"errors": messages, "chained": chained, "collectives": len(hcom)}, f)


def failing(program: str, out: str) -> None:
    import tensorflow as tf

    from graph_ir.distributed import world
    from tf_plugin.hccl import hccl_ops

    group = world()
    last = group.rank == group.size - 1
    if program == "early_exit" and last:
        sys.exit(0)
    try:
        hccl_ops.allreduce(tf.ones([3]), "max" if program == "mismatch" and last else "sum")
    except tf.errors.OpError as e:
        with open(os.path.join(out, f"rank{group.rank}.txt"), "w") as f:
            f.write(f"{type(e).__name__}: {e.message}")
        sys.exit(0 if program == "mismatch" else 1)


if __name__ == "__main__":
    if sys.argv[1] == "values":
        values(sys.argv[2])
    else:
        failing(sys.argv[1], sys.argv[2])
