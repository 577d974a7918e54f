"""The lowering harness: lower a TF step, save it as .air and .pbtxt, load both back, run K steps of each in
graph_ir.Session and K steps in TensorFlow, and compare every variable, slot and counter."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

import graph_ir

K = 4


def _reloaded(graph: graph_ir.Graph, folder: str) -> list[graph_ir.Graph]:
    out = []
    for ext in ("air", "pbtxt"):
        path = os.path.join(folder, f"{graph.name}.{ext}")
        graph.save(path)
        out.append(graph_ir.load(path))
    return out


def max_relative_difference(got: np.ndarray, want: np.ndarray) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.size == 0:
        return 0.0
    return float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-30)))


def run_side_by_side(graph: graph_ir.Graph, tf_step: Callable, feeds: Callable[[int], list[np.ndarray]],
                     variables: Sequence, folder: str, steps: int = K) -> dict[str, float]:
    """Runs `steps` steps in TF (tf_step(*feeds(k))) and in a Session for each reloaded file; returns the largest
    relative difference per variable (GE name), after asserting the dtypes and shapes agree."""
    sessions = []
    for reloaded in _reloaded(graph, folder):
        session = graph_ir.Session()
        session.add_graph(0, reloaded)
        sessions.append(session)
    for k in range(steps):
        args = feeds(k)
        for session in sessions:
            session.run_graph(0, args)
        tf_step(*args)
    differences = {}
    for session in sessions:
        names = [state_name(graph, v) for v in variables]
        for name, var, got in zip(names, variables, session_values(graph, session, variables)):
            want = np.asarray(var.numpy())
            assert got.dtype == want.dtype and got.shape == want.shape, name
            differences[name] = max(differences.get(name, 0.0), max_relative_difference(got, want))
    return differences


def state_name(graph: graph_ir.Graph, variable) -> str:
    try:
        return graph.variable_name(variable)
    except KeyError:  # flat optimizer state, split per model variable
        return graph.flat_state_parts(variable)[0][0].rsplit("/", 1)[0]


def session_values(graph: graph_ir.Graph, session: graph_ir.Session, variables: Sequence) -> list[np.ndarray]:
    """The session's value of each TF variable; a flat state variable is put together from its GE parts."""
    out = []
    for v in variables:
        try:
            out.append(session.get_variables([graph.variable_name(v)])[0])
        except KeyError:  # elements no GE part holds (variables the step does not update) are TF's, unchanged
            parts = graph.flat_state_parts(v)
            full = np.array(v.numpy(), copy=True)
            for (_, offset, _), x in zip(parts, session.get_variables([p[0] for p in parts])):
                full[offset:offset + x.size] = np.ravel(x)
            out.append(full)
    return out


def captured(graph: graph_ir.Graph, candidates: Sequence) -> list:
    """The candidates (TF or Keras variables) that the graph captured, whole or split (flat optimizer state)."""
    out = []
    for v in candidates:
        for lookup in (graph.variable_name, graph.flat_state_parts):
            try:
                lookup(v)
            except KeyError:
                continue
            out.append(v)
            break
    return out
