"""Every rank of an MPI job running the graphs tests/helpers/distributed_lowering.py lowered, with graph_ir's Hcom
engine (graph_ir/distributed), for tests/graph_ir/test_distributed_lowering.py:

    mpiexec -n N python -m mpi4py -m tests.helpers.distributed_lowering_ranks OUT_DIR OPTIMIZER...

Rank r loads OUT_DIR/<optimizer>/rank{r}.air, runs it K times on its batches (feeds{r}.npz) in a Session joined to
the world group, and writes result{r}.npz: the loss of each step and every variable the test compares (by the
names OUT_DIR/<optimizer>.json lists). No TensorFlow here: graph_ir imports none.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np


def main(out: str, names: list[str]) -> None:
    import graph_ir
    from graph_ir.distributed import world

    group = world()
    for name in names:
        folder = os.path.join(out, name)
        with open(os.path.join(out, f"{name}.json")) as f:
            compared = json.load(f)["compared"]
        with np.load(os.path.join(folder, f"feeds{group.rank}.npz")) as f:
            feeds = [f[f"arr_{k}"] for k in range(len(f.files))]
        session = graph_ir.Session(group=group)
        session.add_graph(0, graph_ir.load(os.path.join(folder, f"rank{group.rank}.air")))
        losses = [float(np.asarray(session.run_graph(0, feeds[k:k + 2])[0]).reshape(()))
                  for k in range(0, len(feeds), 2)]
        values = session.get_variables(compared)
        np.savez(os.path.join(folder, f"result{group.rank}.npz"), losses=np.array(losses),
                 **{f"v{i}": v for i, v in enumerate(values)})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
