"""A 2-rank data-parallel training step: graph_ir's rank graphs as an MPI job against TF's own
MultiWorkerMirroredStrategy run of the same step with 2 workers (gRPC on 127.0.0.1), on this machine:

    python -m bench.bench_dp_step [--steps 30] [--width 512] [--per-replica 64]

One run, three phases, each bounded by a timeout:
1. two TF worker processes (MultiWorkerMirroredStrategy): each builds the same seeded MLP (Dense width-width-10,
   ReLU) and Adam (or SGD: --optimizer) in the strategy's scope, traces the custom-loop step (strategy.run,
   gradients all-reduced by TF's CollectiveReduceV2, strategy.reduce of the loss), lowers its trace with
   graph_ir.from_distributed (one graph: its rank's), then times `steps` steps after 3 warm-up steps;
2. `mpiexec -n 2`: each rank loads its graph into graph_ir.Session(group=world()) and times the same steps on the
   same batches (the gradients all-reduced by HcomAllReduce over MPI);
3. the report: median ms per step of each (rank 0's; both ranks wait for each other at every collective), their
   ratio, and the largest difference between the two runs' losses.
Both runs use each library's default threading: 2 processes on the machine's cores. Writes bench/results/dp_step.json.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

TIMEOUT = 900  # seconds for each phase
WARM = 3


def _data(steps: int, ranks: int, per_replica: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    rows = (steps + WARM) * ranks * per_replica
    return rng.standard_normal((rows, width)).astype(np.float32), rng.integers(0, 10, rows).astype(np.int64)


def _batch(x: np.ndarray, y: np.ndarray, k: int, rank: int, ranks: int, per_replica: int):
    first = (k * ranks + rank) * per_replica
    return x[first:first + per_replica], y[first:first + per_replica]


def worker(index: int, ports: list[str], out: str, steps: int, width: int, per_replica: int, name: str) -> None:
    """One TF MultiWorkerMirroredStrategy worker: lowers its trace, then times the steps in TF."""
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                                          "task": {"type": "worker", "index": index}})
    import keras
    import tensorflow as tf

    import graph_ir

    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=120)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    n = strategy.num_replicas_in_sync
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((width,)), keras.layers.Dense(width, activation="relu"),
                                  keras.layers.Dense(width, activation="relu"), keras.layers.Dense(10)])
        optimizer = keras.optimizers.SGD(0.05) if name == "sgd" else keras.optimizers.Adam(1e-3)
        optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")

    @tf.function
    def step(xb, yb):
        def replica_fn(xb, yb):
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True)) / (n * per_replica)
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        return strategy.reduce("SUM", strategy.run(replica_fn, args=(xb, yb)), axis=None)

    x, y = _data(steps, n, per_replica, width)
    batches = [_batch(x, y, k, index, n, per_replica) for k in range(steps + WARM)]
    graph = graph_ir.from_distributed(step, *(tf.constant(a) for a in batches[0]), strategy=strategy)[0]
    graph.save(os.path.join(out, f"rank{index}.air"))
    losses, times = [], []
    for k, (xb, yb) in enumerate(batches):
        xb, yb = tf.constant(xb), tf.constant(yb)
        start = time.perf_counter()
        losses.append(float(step(xb, yb)))
        if k >= WARM:
            times.append((time.perf_counter() - start) * 1e3)
    with open(os.path.join(out, f"tf{index}.json"), "w") as f:
        json.dump({"ms": times, "losses": losses}, f)


def ranks(out: str, steps: int, width: int, per_replica: int) -> None:
    """One rank of the MPI job: the lowered graph in a Session joined to the world group, timed on the same steps."""
    import graph_ir
    from graph_ir.distributed import world

    group = world()
    session = graph_ir.Session(group=group)
    session.add_graph(0, graph_ir.load(os.path.join(out, f"rank{group.rank}.air")))
    x, y = _data(steps, group.size, per_replica, width)
    losses, times = [], []
    for k in range(steps + WARM):
        xb, yb = _batch(x, y, k, group.rank, group.size, per_replica)
        start = time.perf_counter()
        losses.append(float(np.asarray(session.run_graph(0, [xb, yb])[0]).reshape(())))
        if k >= WARM:
            times.append((time.perf_counter() - start) * 1e3)
    with open(os.path.join(out, f"session{group.rank}.json"), "w") as f:
        json.dump({"ms": times, "losses": losses}, f)


def _run_all(commands: list[list[str]], env: dict) -> None:
    """Runs the commands as processes at once, each in a session of its own; kills them all past TIMEOUT."""
    jobs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True) for c in commands]
    try:
        for job in jobs:
            _, err = job.communicate(timeout=TIMEOUT)
            if job.returncode != 0:
                raise SystemExit(f"{' '.join(job.args)} failed (exit {job.returncode}):\n{err[-3000:]}")
    finally:
        for job in jobs:
            if job.poll() is None:
                os.killpg(job.pid, 9)
                job.wait()


def _read(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def _free_ports(count: int) -> list[str]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [str(s.getsockname()[1]) for s in sockets]
    for s in sockets:
        s.close()
    return ports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="timed steps (after 3 warm-up steps)")
    parser.add_argument("--width", type=int, default=512, help="the MLP's input and hidden width")
    parser.add_argument("--per-replica", type=int, default=64, help="rows of each rank's batch")
    parser.add_argument("--optimizer", choices=("adam", "sgd"), default="adam",
                        help="Adam amplifies rounding noise in near-zero gradients into lr-sized steps, so the two "
                             "runs' losses drift apart over tens of steps; SGD's stay within float32 rounding")
    args = parser.parse_args()
    sizes = [str(args.steps), str(args.width), str(args.per_replica)]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root, "TF_CPP_MIN_LOG_LEVEL": "3"}
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    with tempfile.TemporaryDirectory() as out:
        ports = ",".join(_free_ports(2))
        _run_all([[sys.executable, "-m", "bench.bench_dp_step", "--worker", str(i), ports, out, *sizes, args.optimizer]
                  for i in range(2)], env)
        _run_all([[mpiexec, "-n", "2", sys.executable, "-m", "mpi4py", "-m", "bench.bench_dp_step", "--ranks", out,
                   *sizes]], env)
        tf_run, session_run = (_read(os.path.join(out, f"{kind}0.json")) for kind in ("tf", "session"))
    tf_ms, session_ms = float(np.median(tf_run["ms"])), float(np.median(session_run["ms"]))
    diffs = np.abs(np.subtract(tf_run["losses"], session_run["losses"]))
    print("per-step |loss difference|:", " ".join(f"{d:.1e}" for d in diffs))
    diff = float(np.max(diffs))
    row = {"ranks": 2, "optimizer": args.optimizer, "width": args.width, "per_replica": args.per_replica,
           "steps": args.steps, "tf_mwms_ms": tf_ms, "session_ms": session_ms, "session_over_tf": session_ms / tf_ms,
           "max_loss_diff": diff}
    print(f"2-rank {args.optimizer} MLP step (width {args.width}, {args.per_replica} rows per rank): TF MWMS "
          f"{tf_ms:.2f} ms, graph_ir Session over MPI {session_ms:.2f} ms, Session/TF {row['session_over_tf']:.2f}x; "
          f"|loss difference| <= {diff:.1e} over {args.steps + WARM} steps")
    from bench.timing import save_rows

    print("wrote", save_rows("dp_step", [row]))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4], *map(int, sys.argv[5:8]), sys.argv[8])
    elif len(sys.argv) > 1 and sys.argv[1] == "--ranks":
        ranks(sys.argv[2], *map(int, sys.argv[3:6]))
    else:
        main()
