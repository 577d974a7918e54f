"""keras.applications measurements that want a process of their own (so one model's memory is gone before the
next is built): what lowering a model's training step gives (lowering_summary), and how far TF is from itself
(tf_own_noise: the same steps with oneDNN's kernels and with Eigen's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import keras
import numpy as np

import graph_ir
from tests.helpers import ROOT
from tests.helpers.application_steps import absolute_difference, scaled_difference
from tests.helpers.applications import (
    APPLICATIONS,
    FROZEN_BATCH_NORM,
    LEARNING_RATE,
    SCALE_FLOOR,
    Application,
    K,
    batches,
    gradient_step,
    training_step,
)
from tests.helpers.lowering import captured
from tf_plugin.optimizers import FusedEmaAdam


def lowering_summary(label: str, batch: int = 1) -> dict:
    """What lowering `label`'s training step gives: the TF ops without a lowering ({op type: [nodes]}), the
    lowered graph's node count after graph.verify(), the trainable variables it did not capture (paths) and the
    seconds spent building (model and one TF step) and lowering (missing_ops, from_tensorflow, verify)."""
    start = time.perf_counter()
    model, _, step, specs = training_step(APPLICATIONS[label], batch)
    built = time.perf_counter()
    missing = dict(graph_ir.missing_ops(step, *specs))
    graph = graph_ir.from_tensorflow(step, *specs)
    graph.verify()
    held = {id(v) for v in captured(graph, model.trainable_variables)}
    return {"missing": missing, "nodes": len(graph.nodes), "built": built - start,
            "uncaptured": [v.path for v in model.trainable_variables if id(v) not in held],
            "lowered": time.perf_counter() - built}


def lowering_summary_in_subprocess(label: str, batch: int = 1, timeout: float = 900) -> dict:
    """lowering_summary in a fresh process (so that one model's memory is gone before the next is built; in one
    process the allocator keeps it), with its peak RSS in GiB added as "peak"."""
    code = ("import json, resource; from tests.helpers.application_processes import lowering_summary; "
            f"summary = lowering_summary({label!r}, {batch}); "
            "summary['peak'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20; "
            "print('SUMMARY ' + json.dumps(summary))")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=timeout, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("SUMMARY ")]
    assert result.returncode == 0 and lines, result.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("SUMMARY "))


def tf_only(app: Application, frozen_batch_norm: bool = FROZEN_BATCH_NORM, weights: str | None = None,
            steps: int = K, seed: int = 7) -> dict[str, np.ndarray]:
    """TF's side of application_steps.run_application alone, from the weights saved at `weights` if given: the first
    call's gradients ("grad:<variable path>") and every model and optimizer variable after `steps` steps ("<variable
    path>")."""
    keras.utils.set_random_seed(seed)
    model = app.build(frozen_batch_norm)
    if weights:
        model.load_weights(weights)
    optimizer = FusedEmaAdam(LEARNING_RATE, weight_decay=0.01)
    step = gradient_step(model, optimizer)
    batch = batches(seed, app.size)
    step(*batch(-1))
    out = {}
    for k in range(steps):
        _, grads = step(*batch(k))
        if k == 0:
            out.update({f"grad:{v.path}": g.numpy() for v, g in zip(model.trainable_variables, grads)})
    out.update({v.path: np.asarray(v.numpy()) for v in [*model.variables, *optimizer.variables]})
    return out


def _tf_only_in_subprocess(label: str, frozen_batch_norm: bool, weights: str, onednn: bool,
                           path: str) -> dict[str, np.ndarray]:
    code = (f"import numpy as np; from tests.helpers.application_processes import APPLICATIONS, tf_only; "
            f"np.savez({path!r}, **{{k.replace('/', '|'): v for k, v in "
            f"tf_only(APPLICATIONS[{label!r}], {frozen_batch_norm}, {weights!r}).items()}})")
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": str(int(onednn)), "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    with np.load(path) as saved:
        return dict(saved)


def tf_own_noise(label: str, frozen_batch_norm: bool, folder: str) -> tuple[float, float]:
    """How far TF is from itself: the same steps from the same weights (built here, calibrated if frozen, saved)
    with oneDNN's kernels and with Eigen's (TF_ENABLE_ONEDNN_OPTS=1 and 0, each in a subprocess). Returns (the
    gradients' difference as a fraction of the largest gradient, the largest variable difference relative to the
    variable's scale), as run_application measures GE against TF."""
    keras.utils.set_random_seed(7)
    weights = os.path.join(folder, "start.weights.h5")
    APPLICATIONS[label].build(frozen_batch_norm).save_weights(weights)
    runs = [_tf_only_in_subprocess(label, frozen_batch_norm, weights, onednn, os.path.join(folder, f"{onednn}.npz"))
            for onednn in (True, False)]
    grads = [k for k in runs[0] if k.startswith("grad:")]
    largest = max(float(np.max(np.abs(runs[0][k]))) for k in grads)
    gradient = max(absolute_difference(runs[1][k], runs[0][k]) for k in grads) / largest
    variables = max(scaled_difference(runs[1][k], runs[0][k], SCALE_FLOOR) for k in runs[0]
                    if not k.startswith("grad:") and runs[0][k].dtype.kind == "f")
    return gradient, variables
