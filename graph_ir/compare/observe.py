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
from graph_ir.executors import random as random_ops
from graph_ir.executors.plan_steps import CONST, EXECUTOR, Step
from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.nodes import TensorDesc
from graph_ir.opset.hcom import HCOM_OPS
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
                 isolated: bool = True, exact: bool = False):
        self.benchmark, self.tf_types, self.tolerance, self.isolated = benchmark, tf_types, tolerance, isolated
        self.exact = exact  # out of tolerance isolated: also judge by the node's float64 value (exact_outputs)
        self.rows: list[Row] = []
        self._carried: dict[tuple[str, int], tuple[float, float]] = {}  # output -> (max abs error, scale error)
        self._departed: dict[str, bool] = {}  # GE node -> it, or a node it depends on, is out of tolerance
        # results, the inputs TF gave, and the magnitude of each output of a sum of products (tolerances.py)
        self._isolated: dict[str, tuple[Any, ...]] = {}
        # the largest term of each output of a sum (of products), on TF's inputs: what rounding noise is relative to
        self._noise_scales: dict[str, list[float]] = {}

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
            with random_ops.unchanged():  # a stateful random node draws again what its run draws
                results = [np.array(r, copy=True) for r in executor(node, tf_inputs)]
            magnitudes = None
            if self.tf_types[node.name] in SUMS_OF_PRODUCTS:
                absolute = [np.abs(a) if a.dtype.kind in "fV" else a for a in tf_inputs]  # axes stay as they are
                magnitudes = [float(np.max(np.abs(r), initial=0.0)) for r in executor(node, absolute)]
            elif self.tf_types[node.name] in SUMS:  # a sum of its inputs: its terms are as large as they are
                largest = max((float(np.max(np.abs(a), initial=0.0)) for a in tf_inputs if a.dtype.kind in "fV"),
                              default=0.0)
                magnitudes = [0.0] * len(node.output_descs)
                self._noise_scales[node.name] = [largest] * len(node.output_descs)
            if magnitudes is not None and node.name not in self._noise_scales:
                self._noise_scales[node.name] = magnitudes
            self._isolated[node.name] = (results, replaced, magnitudes, executor, tf_inputs)
            return executor(node, inputs)
        return run

    def observe(self, step: Step, results: Sequence[np.ndarray]) -> None:
        """Compares the outputs of `step`'s node with TF's (called as the run stores them)."""
        node = step.node
        given = [(h.node.name, h.index) for h in node.inputs if h is not None]
        carried = [self._carried.get(key, (0.0, 0.0)) for key in given]
        upstream_within = not any(self._departed.get(name, False) for name, _ in given)
        isolated, replaced, magnitudes, executor, tf_inputs = self._isolated.pop(
            node.name, (None, [False] * len(given), None, None, None))
        exact: list[np.ndarray] | None | bool = False  # not computed yet (None: the op has no float64 reference)
        noise_scales = self._noise_scales.pop(node.name, None)
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
                if self.exact and row.isolated_error > row.tolerance + row.isolated_carried_in:  # a third side
                    if exact is False:
                        exact = exact_outputs(executor, node, tf_inputs)
                    if exact is None or exact[j].size != theirs.size:
                        row.exact_note = "no exact reference"
                    else:
                        reference = exact[j].reshape(theirs.shape)
                        scale_of = row.magnitude or float(np.max(np.abs(reference), initial=0.0))
                        row.ge_exact_error = _error(np.asarray(isolated[j]).reshape(theirs.shape), reference, scale_of)
                        row.tf_exact_error = _error(theirs, reference, scale_of)
                        row.rounding_bound = _rounding_bound(tf_inputs, theirs)
            if noise_scales and ours.shape == theirs.shape and theirs.dtype.kind in "fV":
                bound = NOISE_ROUNDINGS * float(np.finfo(theirs.dtype).eps) * noise_scales[j]
                row.noise = bound > 0 and scale <= bound and float(np.max(np.abs(ours), initial=0.0)) <= bound
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


_FLOAT64 = as_dtype("float64")


def exact_outputs(executor: Callable, node: Any, inputs: list[np.ndarray]) -> list[np.ndarray] | None:
    """`node`'s outputs computed in float64 by its own executor on `inputs` with the floating ones widened: the exact
    reference to judge GE and TF by. None where the op takes no float64 (its registry entry) or the executor fails
    or does not give float64."""
    if node.type in HCOM_OPS:  # a collective runs on every rank at once: a run some ranks make would hang the rest
        return None
    floating = [k for k, a in enumerate(inputs) if a.dtype.kind in "fV"]
    outputs = [k for k, d in enumerate(node.output_descs) if np.dtype(d.dtype.numpy).kind in "fV"]
    declared = node.op.outputs
    if not floating or not outputs or any("float64" not in declared[min(k, len(declared) - 1)].dtypes
                                          for k in outputs):
        return None
    wide = [a.astype(np.float64) if k in floating else np.array(a, copy=True) for k, a in enumerate(inputs)]
    descs = [TensorDesc(d.name, _FLOAT64, d.shape, d.list_meta) if k in outputs else d
             for k, d in enumerate(node.output_descs)]
    try:
        with np.errstate(all="ignore"):
            results = executor(dataclasses.replace(node, output_descs=descs), wide)
    except Exception:  # noqa: BLE001 - any failure: no reference, the verdict stays TF's
        return None
    results = [np.asarray(r) for r in results]
    if len(results) != len(descs) or any(results[k].dtype != np.float64 for k in outputs):
        return None
    return results


def _rounding_bound(inputs: list[np.ndarray], output: np.ndarray) -> float:
    """How far rounding in the output's dtype may take a value from exact, on the isolated error's scale: one rounding
    per term summed into an element (the largest floating input's elements per output element; one for an
    elementwise op). A value farther than that from exact is not rounding: the exact reference, the GE executor's
    own in float64, is then not trusted (it may be wrong the same way)."""
    if output.dtype.kind not in "fV":
        return 0.0
    largest = max((a.size for a in inputs if a.dtype.kind in "fV"), default=0)
    return max(1.0, largest / max(output.size, 1)) * float(np.finfo(output.dtype).eps)


def _error(values: np.ndarray, reference: np.ndarray, scale: float) -> float:
    """max |values - reference| / scale (the reference's own scale where `scale` is 0)."""
    diff = float(np.max(np.abs(np.asarray(values, np.float64) - reference), initial=0.0))
    return diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))


# A sum within this many roundings of its dtype of its largest term (a sum of products: of the sum of the terms'
# magnitudes), in TF and in GE, is rounding noise: zero in exact arithmetic, say (the gradient of a bias before a
# BatchNormalization).
NOISE_ROUNDINGS = 16
# Ops that sum their inputs (sums of products are in tolerances.SUMS_OF_PRODUCTS).
SUMS = frozenset({"Add", "AddN", "AddV2", "Sub"})


def _carried_in(carried: list[tuple[float, float]], scale: float, dtype: np.dtype) -> float:
    """The error inputs carry into an output of `scale`: each input's at gain one (its absolute error over this
    scale, or its own scale error, whichever is larger; GAIN is the caller's), plus one rounding of the output
    where inputs differ."""
    total = sum(max(rel, err / scale if scale > 0 else 0.0) for err, rel in carried)
    return total + float(np.finfo(dtype).eps) if total > 0 and dtype.kind in "fV" else total


def run_observed(session: Session, graph_id: int, inputs: Sequence[Any], observer: Observer) -> list[np.ndarray]:
    """Session.run_graph(graph_id, inputs), every node observed by `observer`."""
    return session.run_graph_wrapped(graph_id, inputs, observer.wrap)
