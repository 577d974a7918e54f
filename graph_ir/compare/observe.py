"""A Session run that compares each GE node's outputs with TF's as the node produces them (accumulated), and runs
each compared node a second time on copies of TF's values of its inputs (isolated). Nothing is kept but the rows:
the Session's values die as in any run."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graph_ir.compare import metrics
from graph_ir.compare.report import Row
from graph_ir.compare.tolerances import GAIN, SUMS_OF_PRODUCTS
from graph_ir.executors.plan_steps import CONST, EXECUTOR, Step
from graph_ir.runtime.session import Session

# TF's value of a node output, by (GE node name, output index) = (TF node name, output index); None if TF has none.
Benchmark = Callable[[str, int], "np.ndarray | None"]


@dataclasses.dataclass
class _ObservedStep(Step):
    observer: Any = None

    def store(self, values: list[Any], results: list[np.ndarray]) -> None:
        super().store(values, results)
        self.observer.observe(self, results)


class Observer:
    """Makes the rows of one run: `benchmark` gives TF's values, `tf_types` the TF op type of each GE node that
    stands for a TF node, `tolerance` its tolerance (from the GE node, the TF op type and the output's dtype)."""

    def __init__(self, benchmark: Benchmark, tf_types: dict[str, str], tolerance: Callable[[Any, str, np.dtype], float],
                 isolated: bool = True):
        self.benchmark, self.tf_types, self.tolerance, self.isolated = benchmark, tf_types, tolerance, isolated
        self.rows: list[Row] = []
        self._carried: dict[tuple[str, int], tuple[float, float]] = {}  # output -> (max abs error, scale error)
        self._departed: dict[str, bool] = {}  # GE node -> it, or a node it depends on, is out of tolerance
        # results, the inputs TF gave, and the magnitude of each output of a sum of products (tolerances.py)
        self._isolated: dict[str, tuple[list[np.ndarray], list[bool], list[float] | None]] = {}

    def wrap(self, step: Step) -> Step:
        """`step`, observed: compared when it stores its results; an executor also run isolated first."""
        fields = {f.name: getattr(step, f.name) for f in dataclasses.fields(Step)}
        observed = _ObservedStep(**fields, observer=self)
        if self.isolated and step.kind == EXECUTOR and step.node.name in self.tf_types:
            observed.run = self._isolating(step.run)
        return observed

    def _isolating(self, executor: Callable) -> Callable:
        def run(node, inputs: list[np.ndarray]) -> list[np.ndarray]:
            given = [h for h in node.inputs if h is not None]
            tf_inputs, replaced = [], []
            for handle, ours in zip(given, inputs, strict=True):
                # A Const input is the lowering's own value, compared as a row of its own: fed as it is, so a wrong
                # constant shows at what reads it.
                theirs = None if handle.node.type == "Const" else self.benchmark(handle.node.name, handle.index)
                same = theirs is not None and theirs.shape == np.shape(ours) and theirs.dtype == np.asarray(ours).dtype
                tf_inputs.append(np.array(theirs if same else ours, copy=True))  # copies: executors may write in place
                replaced.append(same)
            results = [np.array(r, copy=True) for r in executor(node, tf_inputs)]
            magnitudes = None
            if self.tf_types[node.name] in SUMS_OF_PRODUCTS:
                absolute = [np.abs(a) if a.dtype.kind in "fV" else a for a in tf_inputs]  # axes stay as they are
                magnitudes = [float(np.max(np.abs(r), initial=0.0)) for r in executor(node, absolute)]
            self._isolated[node.name] = (results, replaced, magnitudes)
            return executor(node, inputs)
        return run

    def observe(self, step: Step, results: Sequence[np.ndarray]) -> None:
        """Compares the outputs of `step`'s node with TF's (called as the run stores them)."""
        node = step.node
        given = [(h.node.name, h.index) for h in node.inputs if h is not None]
        carried = [self._carried.get(key, (0.0, 0.0)) for key in given]
        upstream_within = not any(self._departed.get(name, False) for name, _ in given)
        isolated, replaced, magnitudes = self._isolated.pop(node.name, (None, [False] * len(given), None))
        tf_type = self.tf_types.get(node.name)
        departed, uncompared = not upstream_within, []
        for j, ours in enumerate(results):
            theirs = self.benchmark(node.name, j) if tf_type is not None else None
            if theirs is None:
                uncompared.append(j)
                continue
            ours = np.asarray(ours)
            if ours.size == theirs.size:  # GE may hold a scalar as [1]: the same values
                ours = ours.reshape(theirs.shape)
            found = metrics.compute(ours, theirs) if ours.shape == theirs.shape else metrics.NAN
            scale = float(np.max(np.abs(theirs), initial=0.0)) if theirs.dtype.kind in "fV" else 0.0
            row = Row(node.name, node.type, node.name, tf_type, j, tuple(theirs.shape), str(theirs.dtype), found,
                      self.tolerance(node, tf_type, theirs.dtype),
                      GAIN.get(tf_type, 1.0) * _carried_in(carried, scale, theirs.dtype),
                      upstream_within=upstream_within)
            if ours.shape != theirs.shape:
                row.note = f"shape {list(ours.shape)} against TF's {list(theirs.shape)}"
            elif self.isolated and step.kind == CONST:
                row.isolated = found  # a Const runs on no inputs: as it is, it is its own isolated run
            elif isolated is not None:
                row.isolated = metrics.compute(np.asarray(isolated[j]).reshape(theirs.shape), theirs)
                row.magnitude = magnitudes[j] if magnitudes else 0.0
                row.isolated_carried_in = _carried_in([c for c, tf in zip(carried, replaced, strict=True) if not tf],
                                                      scale, theirs.dtype)
            self.rows.append(row)
            self._carried[(node.name, j)] = (found.max_abs, found.scale_error)
            departed = departed or not row.within
        self._departed[node.name] = departed
        # An output not compared (a While's TensorList, say) carries what came in and the node's compared errors.
        compared = [self._carried[(node.name, j)] for j in range(len(results)) if j not in uncompared]
        passed = (sum(c[0] for c in carried) + max((c[0] for c in compared), default=0.0),
                  sum(c[1] for c in carried) + max((c[1] for c in compared), default=0.0))
        for j in uncompared:
            self._carried[(node.name, j)] = passed
        for i in (node.op.refs or {}).values():  # a Variable written in place holds what its writer carried in
            h = node.inputs[i]
            self._carried[(h.node.name, h.index)] = (sum(c[0] for c in carried), sum(c[1] for c in carried))
            self._departed[h.node.name] = self._departed.get(h.node.name, False) or not upstream_within


def _carried_in(carried: list[tuple[float, float]], scale: float, dtype: np.dtype) -> float:
    """The error inputs carry into an output of `scale`: each input's at gain one (its absolute error over this
    scale, or its own scale error, whichever is larger; GAIN is the caller's), plus one rounding of the output
    where inputs differ."""
    total = sum(max(rel, err / scale if scale > 0 else 0.0) for err, rel in carried)
    return total + float(np.finfo(dtype).eps) if total > 0 and dtype.kind in "fV" else total


def run_observed(session: Session, graph_id: int, inputs: Sequence[Any], observer: Observer) -> list[np.ndarray]:
    """Session.run_graph(graph_id, inputs), every node observed by `observer`."""
    return session.run_graph_wrapped(graph_id, inputs, observer.wrap)
