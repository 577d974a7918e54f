"""msaccucmp's comparison metrics of one tensor against its benchmark, and the scale-relative error the lowering
table's tolerances are stated in.

Definitions follow msprobe's compare (mindstudio-probe, msprobe/core/compare/npy_compare.py): values in float64;
NaN and Inf must sit at the same places in both (they are then left out), else every metric is NaN; the relative
error of an element is |ours - benchmark| / |benchmark|, a zero benchmark element counting as float64's epsilon;
the thousandth ratios are the share of elements whose relative error is *below* 1/1000 and 5/1000 (1.0 is best)."""

from __future__ import annotations

from dataclasses import astuple, dataclass

import numpy as np

# The CSV columns, named as msaccucmp and msprobe name them.
COLUMNS = ("CosineSimilarity", "MaxAbsoluteError", "MaxRelativeError", "MeanAbsoluteError", "RootMeanSquareError",
           "RelativeEuclideanDistance", "One Thousandth Err Ratio", "Five Thousandths Err Ratio")
_EPS = float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class Metrics:
    """msaccucmp's metrics (COLUMNS, in order) and `scale_error`: max |ours - benchmark| / max |benchmark|, the
    measure the lowering table's tolerances use (0 when both are all zeros, inf when only the benchmark is)."""

    cosine: float
    max_abs: float
    max_rel: float
    mean_abs: float
    rmse: float
    relative_euclidean: float
    thousandth: float
    five_thousandths: float
    scale_error: float

    def columns(self) -> tuple[float, ...]:
        """The values of COLUMNS, in order."""
        return astuple(self)[:len(COLUMNS)]


NAN = Metrics(*([float("nan")] * 8), scale_error=float("inf"))


def compute(ours: np.ndarray, benchmark: np.ndarray) -> Metrics:
    """The metrics of `ours` against `benchmark` (same shape; any real or bool dtype)."""
    if ours.shape != benchmark.shape:
        raise ValueError(f"shapes differ: {list(ours.shape)} against {list(benchmark.shape)}")
    a = np.asarray(ours, dtype=np.float64).reshape(-1)
    b = np.asarray(benchmark, dtype=np.float64).reshape(-1)
    if a.size == 0:
        return Metrics(1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0)
    finite_a, finite_b = np.isfinite(a), np.isfinite(b)
    if not (finite_a.all() and finite_b.all()):
        same = np.array_equal(finite_a, finite_b) and np.array_equal(np.isnan(a), np.isnan(b)) \
            and np.array_equal(a[~finite_a], b[~finite_b], equal_nan=True)
        if not same:
            return NAN
        a, b = a[finite_a], b[finite_b]
        if a.size == 0:
            return Metrics(1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0)
    diff = np.abs(a - b)
    relative = diff / np.where(b == 0, _EPS, np.abs(b))
    norm_a, norm_b, norm_diff = (float(np.linalg.norm(v)) for v in (a, b, diff))
    if norm_a <= _EPS and norm_b <= _EPS:
        cosine = 1.0
    elif norm_a <= _EPS or norm_b <= _EPS:
        cosine = float("nan")
    else:
        cosine = float(np.dot(a, b) / (norm_a * norm_b))
    scale, max_abs = float(np.abs(b).max()), float(diff.max())
    return Metrics(
        cosine=cosine, max_abs=max_abs, max_rel=float(relative.max()), mean_abs=float(diff.mean()),
        rmse=float(np.sqrt(np.mean(diff * diff))),
        relative_euclidean=norm_diff / norm_b if norm_b > 0 else (0.0 if norm_diff == 0 else float("inf")),
        thousandth=float(np.mean(relative < 1e-3)), five_thousandths=float(np.mean(relative < 5e-3)),
        scale_error=max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf")))
