"""The fuzz runner and the hypothesis strategies shared by the fuzz suites (tests/fuzz)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from op_spec import reference

FLOATS = ["float16", "bfloat16", "float32", "float64"]
OTHER = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128"]
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
SPECIALS = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e38, -1e38, 1e-40, 6.5e4, -1e-8]
CASES, SLOW_CASES = 120, 1500  # per resource-op / kernels test
REF_CASES, REF_SLOW_CASES = 40, 300  # per ref-op test (each case builds a graph and a Session)


def fuzz(strategy, run_case, slow: bool, cases: int = CASES, slow_cases: int = SLOW_CASES) -> list[str]:
    """Runs `run_case` on `cases` drawn examples (derandomized in CI, random in the slow run); returns the outcomes
    ("ok" or "error") so a test can check that both sides of the property were exercised."""
    outcomes = []

    @settings(max_examples=slow_cases if slow else cases, deadline=None, derandomize=not slow,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(strategy)
    def run(case):
        outcomes.append(run_case(case))

    run()
    return outcomes


shapes = st.lists(st.integers(0, 3), min_size=0, max_size=9).map(tuple)


@st.composite
def arrays(draw, dtype: str, shape):
    n = int(np.prod(shape, dtype=np.int64))
    # Values come from a drawn seed, not a drawn list: shapes up to 3**9 elements exceed what hypothesis can draw.
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    if dtype in OTHER:
        return rng.integers(0, 4, n).astype(np.dtype(dtype)).reshape(shape)
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3, n)
    if n and draw(st.booleans()):
        picks = rng.random(n) < 0.3
        x[picks] = rng.choice(SPECIALS, picks.sum())
    with np.errstate(over="ignore"):
        return x.astype(reference.NP_DTYPES[dtype]).reshape(shape)


def moderate(*xs) -> np.ndarray:
    """Elements where every input is finite and of moderate size (where the float64 reference is meaningful)."""
    ok = None
    for x in xs:
        x64 = np.asarray(x, np.float64)
        good = np.isfinite(x64) & (np.abs(x64) < 1e3) & ((x64 == 0) | (np.abs(x64) > 1e-30))
        ok = good if ok is None else ok & good
    return ok


def same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
