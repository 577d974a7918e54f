"""FusedEmaAdam in graph_ir.Session: the fused ApplyFusedEmaAdam (lr frozen into its attribute) against the GE-op form
that takes lr as a tensor (a schedule, or freeze_learning_rate=False; graph_ir/lowering/lr_tensor.py), and against
TF's own step with our kernel, on one variable of each size. Both graphs are lowered from the same Keras step and
run in alternation (medians of interleaved rounds; compare the ratios, the machine is shared).

    python -m bench.bench_lr_tensor [--sizes 65536,1048576,4194304] [--repeats 15]
"""

from __future__ import annotations

import argparse

import keras
import numpy as np
import tensorflow as tf

import graph_ir
from bench.timing import median_ms_interleaved, save_rows
from tf_plugin.optimizers import FusedEmaAdam


def _case(size: int, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    variable = keras.Variable(rng.standard_normal(size).astype(np.float32))
    optimizer = FusedEmaAdam(1e-3, weight_decay=0.01)
    optimizer.build([variable])

    @tf.function
    def step(grad):
        optimizer.apply_gradients([(grad, variable)])

    spec = tf.TensorSpec((size,), tf.float32)
    grad = rng.standard_normal(size).astype(np.float32)
    sessions = {}
    for name, freeze in (("fused", True), ("lr_tensor", False)):
        graph = graph_ir.from_tensorflow(step, spec, freeze_learning_rate=freeze)
        assert bool(graph.nodes_of_type("ApplyFusedEmaAdam")) == freeze
        session = graph_ir.Session()
        session.add_graph(0, graph)
        sessions[name] = session
    times = median_ms_interleaved({"fused": lambda: sessions["fused"].run_graph(0, [grad]),
                                   "lr_tensor": lambda: sessions["lr_tensor"].run_graph(0, [grad]),
                                   "tf": lambda: step(grad)}, repeats)
    return {"size": size, **{f"{k}_ms": v for k, v in times.items()},
            "lr_tensor_over_fused": times["lr_tensor"] / times["fused"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="65536,1048576,4194304")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    rows = [_case(int(s), args.repeats) for s in args.sizes.split(",")]
    print(f"{'elements':>10} {'fused ms':>10} {'lr tensor ms':>13} {'TF ms':>8} {'tensor/fused':>13}")
    for r in rows:
        print(f"{r['size']:>10} {r['fused_ms']:>10.3f} {r['lr_tensor_ms']:>13.3f} {r['tf_ms']:>8.3f} "
              f"{r['lr_tensor_over_fused']:>12.2f}x")
    print("wrote", save_rows("lr_tensor", rows))


if __name__ == "__main__":
    main()
