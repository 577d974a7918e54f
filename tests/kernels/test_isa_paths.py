"""The SIMD paths against the portable loop: float32 bitwise, float16/bfloat16 the same rounding, on every path this
machine supports (each forced with TF_PLUGIN_ISA in its own process); and the narrowing of exact products of every
16-bit pattern against NumPy / ml_dtypes round-to-nearest-even."""

from __future__ import annotations

import os
import subprocess
import sys

import ml_dtypes  # noqa: F401  (registers bfloat16 with NumPy for np.load)
import numpy as np
import pytest

from op_spec import reference
from tests.helpers import ROOT, isa_battery

PATHS = ["portable", "avx2", "avx512", "avx512bf16"]


def _run(isa: str, out) -> dict:
    env = {**os.environ, "TF_PLUGIN_ISA": isa, "TF_CPP_MIN_LOG_LEVEL": "2"}
    subprocess.run([sys.executable, "-m", "tests.helpers.isa_battery", str(out)], cwd=ROOT, env=env, check=True,
                   timeout=600)
    return isa_battery.load(str(out))


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    """{isa: battery results} for every path the CPU runs (a request above the CPU's best is capped: skipped)."""
    got = {}
    for isa in PATHS:
        res = _run(isa, tmp_path_factory.mktemp(isa) / "out.npz")
        if res.pop("isa") == isa:
            got[isa] = res
    return got


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint32 if x.dtype.itemsize == 4 else np.uint16)


def assert_same(a: np.ndarray, b: np.ndarray, what: str) -> None:
    """Bitwise equal, except that any NaN equals any NaN (payloads depend on operand order)."""
    a_nan, b_nan = np.isnan(a.astype(np.float32)), np.isnan(b.astype(np.float32))
    np.testing.assert_array_equal(a_nan, b_nan, err_msg=f"{what}: NaN positions differ")
    differ = np.nonzero(_bits(a)[~a_nan] != _bits(b)[~b_nan])[0]
    assert differ.size == 0, f"{what}: {differ.size} elements differ, first at {differ[0]}: {a[~a_nan][differ[0]]!r} " \
                             f"vs {b[~b_nan][differ[0]]!r}"


def test_every_supported_path_ran(results):
    assert "portable" in results
    print("paths tested:", sorted(results))


@pytest.mark.parametrize("isa", PATHS[1:])
def test_path_matches_portable(results, isa):
    if isa not in results:
        pytest.skip(f"this CPU has no {isa}")
    base = results["portable"]
    assert results[isa].keys() == base.keys()
    for key in base:
        assert_same(results[isa][key], base[key], f"{isa} {key}")


@pytest.mark.parametrize("isa", PATHS)
def test_narrowing_is_round_to_nearest_even(results, isa):
    if isa not in results:
        pytest.skip(f"this CPU has no {isa}")
    for dtype, multipliers in isa_battery.MULTIPLIERS.items():
        np_dtype = reference.NP_DTYPES[dtype]
        every = np.arange(1 << 16, dtype=np.uint16).view(np_dtype).astype(np.float64)
        for c in multipliers:
            # TensorFlow runs kernels with FTZ/DAZ set: float32 subnormal inputs and results count as 0 (as in stock
            # ops). Only bfloat16 has such values; half subnormals widen to float32 normals.
            tiny = np.finfo(np.float32).tiny
            flushed = np.where(np.abs(every) < tiny, 0.0, every)
            exact = flushed * float(np_dtype(c))  # exact in float64 (and in float32: 22 or 16 significant bits)
            exact = np.where(np.abs(exact) < tiny, 0.0, exact)
            want = exact.astype(np.float32).astype(np_dtype)  # one rounding, by NumPy / ml_dtypes
            got = results[isa][f"narrow/{dtype}/{c}"]
            # var = 0 - (g * -c): a zero product comes out +0 whatever its sign, as the formula says.
            checked = np.isfinite(every) & (exact != 0)
            assert_same(got[checked], want[checked], f"{isa} narrow {dtype} x {c}")
            assert np.all(got[exact == 0].astype(np.float32) == 0)
