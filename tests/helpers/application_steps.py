"""K steps of a keras.applications model's lowered training step in graph_ir.Session beside K steps in TensorFlow
(tests/helpers/applications.py builds them), and, for a chaotic model, TF's own spread by the same metrics
(tests/helpers/tf_spread.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import graph_ir
from tests.helpers import tf_spread
from tests.helpers.applications import BATCH, SCALE_FLOOR, Application, K, batches, training_step
from tests.helpers.lowering import captured, session_values, state_name


@dataclass
class Comparison:
    """What one model's K steps gave: the largest gradient difference as a fraction of the largest gradient (the
    first call, same weights on both sides), each state variable's max |GE - TF| / max(max |TF|, SCALE_FLOOR) after
    K steps, the absolute difference of each, each step's loss difference (relative), and the seconds spent.
    `spread` holds TF's own distances by the same metrics where they were measured (zeros where not): the largest
    among tf_spread.RUNS runs of TF again from the start state, state and batches perturbed by rounding."""

    gradient: float
    variables: dict[str, float]
    absolute: dict[str, float]
    losses: list[float]
    seconds: dict[str, float] = field(default_factory=dict)
    graph: graph_ir.Graph | None = None
    uncompared: list[str] = field(default_factory=list)  # trainable variables the graph does not hold (none)
    spread: Comparison | None = None

    @property
    def loss(self) -> float:
        return max(self.losses)


@dataclass
class _Run:
    """One side's K steps: each step's loss, the first call's gradients, and the state variables after K steps."""

    losses: list[np.ndarray]
    gradients: list[np.ndarray]
    state: list[np.ndarray]


def scaled_difference(got: np.ndarray, want: np.ndarray, floor: float = 1e-30) -> float:
    """max |got - want| / max(max |want|, floor)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), floor)) if want.size else 0.0


def absolute_difference(got: np.ndarray, want: np.ndarray) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want))) if want.size else 0.0


def _distances(got: _Run, want: _Run, names: list[str]) -> Comparison:
    """`got` against `want` by Comparison's metrics."""
    largest = max(float(np.max(np.abs(w))) for w in want.gradients)
    gradient = max(absolute_difference(g, w) for g, w in zip(got.gradients, want.gradients)) / largest
    variables, absolute = {}, {}
    for name, g, w in zip(names, got.state, want.state):
        assert g.dtype == w.dtype and g.shape == w.shape, name
        variables[name], absolute[name] = scaled_difference(g, w, SCALE_FLOOR), absolute_difference(g, w)
    return Comparison(gradient, variables, absolute, [scaled_difference(g, w) for g, w in zip(got.losses, want.losses)])


def _largest(runs: list[Comparison]) -> Comparison:
    """Each metric's largest value among the runs."""
    return Comparison(max(r.gradient for r in runs), tf_spread.largest([r.variables for r in runs]),
                      tf_spread.largest([r.absolute for r in runs]), [max(x) for x in zip(*(r.losses for r in runs))])


def _tf_run(step: Callable, inputs: list, state: list, perturb_seed: int | None = None) -> _Run:
    """TF's steps on `inputs` (each float perturbed by rounding with `perturb_seed`)."""
    losses, gradients = [], []
    for k, args in enumerate(inputs):
        loss, grads = step(*(args if perturb_seed is None else tf_spread.perturbed(args, perturb_seed + k + 1)))
        losses.append(loss.numpy())
        if k == 0:
            gradients = [g.numpy() for g in grads]
    return _Run(losses, gradients, [np.array(v.numpy(), copy=True) for v in state])


def run_application(app: Application, folder: str, steps: int = K, seed: int = 7, spread: bool = False
                    ) -> Comparison:
    """Builds `app` (weights=None, seeded), traces its step with FusedEmaAdam, lowers it (after one TF step builds
    the optimizer's state), saves and reloads the .air, and runs `steps` steps in graph_ir.Session beside `steps`
    TF steps on the same batches; with `spread`, TF's steps again from the start state, perturbed by rounding
    (tests/helpers/tf_spread.py), to measure how chaotic the step is. Raises graph_ir.LoweringError if the step cannot be lowered."""
    seconds = {}
    start = time.perf_counter()
    model, optimizer, step, specs = training_step(app, BATCH, seed)
    batch = batches(seed, app.size)
    batch(-1)  # the batch training_step ran, drawn again so that the K batches below stay the same
    inputs = [batch(k) for k in range(steps)]
    seconds["tf build"] = time.perf_counter() - start
    start = time.perf_counter()
    graph = graph_ir.from_tensorflow(step, *specs)
    path = os.path.join(folder, f"{app.name}.air")
    graph.save(path)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.load(path))
    seconds["lower"] = time.perf_counter() - start
    state = captured(graph, [*model.variables, *optimizer.variables])
    held = {id(v) for v in state}
    uncompared = [v.path for v in model.trainable_variables if id(v) not in held]
    start_state = tf_spread.Snapshot([*model.variables, *optimizer.variables])
    start = time.perf_counter()
    ge_losses, ge_gradients = [], []
    for k, args in enumerate(inputs):
        got = session.run_graph(0, list(args))
        ge_losses.append(got[0])
        if k == 0:
            ge_gradients = got[1:]
    seconds["ge steps"] = time.perf_counter() - start
    start = time.perf_counter()
    want = _tf_run(step, inputs, state)
    seconds["tf steps"] = time.perf_counter() - start
    assert len(ge_gradients) == len(want.gradients)
    assert all(g.shape == w.shape for g, w in zip(ge_gradients, want.gradients))
    names = [state_name(graph, v) for v in state]
    result = _distances(_Run(ge_losses, ge_gradients, session_values(graph, session, state)), want, names)
    result.seconds, result.graph, result.uncompared = seconds, graph, uncompared
    if not spread:
        result.spread = Comparison(0.0, dict.fromkeys(result.variables, 0.0), {}, [0.0] * len(result.losses))
    else:
        runs = []
        for run in range(tf_spread.RUNS):
            start_state.restore(perturb_seed=100 * run)
            runs.append(_distances(_tf_run(step, inputs, state, perturb_seed=100 * run), want, names))
        result.spread = _largest(runs)
    return result
