"""graph_ir.compare's metrics against their definitions, computed here in float64 element by element: fresh random
values with zeros, negatives, ties and odd sizes; NaN and Inf in the same or different places."""

from __future__ import annotations

import math

import numpy as np
import pytest

from graph_ir.compare import compute


def _reference(a: np.ndarray, b: np.ndarray) -> list[float]:
    a, b = [float(v) for v in a.reshape(-1)], [float(v) for v in b.reshape(-1)]
    eps = float(np.finfo(np.float64).eps)
    diff = [abs(x - y) for x, y in zip(a, b)]
    rel = [d / (abs(y) if y != 0 else eps) for d, y in zip(diff, b)]
    dot, na, nb = sum(x * y for x, y in zip(a, b)), math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return [dot / (na * nb), max(diff), max(rel), sum(diff) / len(a), math.sqrt(sum(d * d for d in diff) / len(a)),
            math.sqrt(sum(d * d for d in diff)) / nb, sum(r < 1e-3 for r in rel) / len(a),
            sum(r < 5e-3 for r in rel) / len(a), max(diff) / max(abs(y) for y in b)]


@pytest.mark.parametrize("seed,shape,dtype", [(0, (7,), np.float32), (1, (3, 5, 2), np.float32), (2, (13,), np.float64),
                                              (3, (2, 9), np.float16)])
def test_metrics_match_their_definitions(seed, shape, dtype):
    rng = np.random.default_rng(seed)
    b = rng.standard_normal(shape).astype(dtype)
    b.reshape(-1)[::4] = 0  # zeros (a zero benchmark counts as epsilon), ties and negatives
    b.reshape(-1)[1::5] = b.reshape(-1)[2::5][:b.reshape(-1)[1::5].size]
    a = (b.astype(np.float64) * (1 + rng.uniform(-4e-3, 4e-3, shape)) + (b == 0) * 1e-20).astype(dtype)
    got = compute(a, b)
    want = _reference(a, b)
    np.testing.assert_allclose([*got.columns(), got.scale_error], want, rtol=1e-12)


def test_equal_arrays_and_zeros():
    x = np.array([[0.0, -1.5], [2.0, 2.0]], np.float32)
    m = compute(x, x.copy())
    assert (m.cosine, m.max_abs, m.max_rel, m.thousandth, m.scale_error) == (1.0, 0.0, 0.0, 1.0, 0.0)
    zeros = np.zeros(5, np.float32)
    assert compute(zeros, zeros).cosine == 1.0 and compute(zeros, zeros).scale_error == 0.0
    assert math.isnan(compute(np.ones(5, np.float32), zeros).cosine)
    assert compute(np.ones(5, np.float32), zeros).scale_error == math.inf


def test_nan_and_inf_in_the_same_places_are_left_out_elsewhere_every_metric_is_nan():
    b = np.array([1.0, np.nan, np.inf, -2.0], np.float32)
    a = np.array([1.0, np.nan, np.inf, -2.5], np.float32)
    m = compute(a, b)
    assert m.max_abs == 0.5 and m.scale_error == 0.25
    moved = compute(np.array([1.0, 1.0, np.inf, -2.0], np.float32), b)
    assert math.isnan(moved.cosine) and math.isnan(moved.max_abs) and moved.scale_error == math.inf
    assert compute(np.array([1.0, np.nan, -np.inf, -2.0], np.float32), b).scale_error == math.inf


def test_shapes_must_agree():
    with pytest.raises(ValueError, match=r"\[2\] against \[3\]"):
        compute(np.zeros(2), np.zeros(3))
