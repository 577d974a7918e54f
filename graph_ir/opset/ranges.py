"""TF's Range (tensorflow/core/kernels/sequence_ops.cc, RangeOp): its checks, its length and its values, shared by the
array family's prototype (which needs only the length, so loading a file computes nothing big) and its executor.

- delta != 0, and start <= limit when delta > 0, else start >= limit (so a NaN delta takes the second check);
- the length: for integers ceil(|limit - start| / |delta|), exact (Python ints: no int64 overflow); for floats
  ceil(|(limit - start) / delta|) computed in the dtype, which must be a number <= 2**63 - 1 (not NaN or inf);
- the values: start + T(i) * delta, each operation rounded to the dtype T (T(i) too), as TF 2.x computes them.
"""

from __future__ import annotations

import math

import numpy as np

from graph_ir.ir.errors import GraphError

# graph_ir's bound on a Range's length: the output is materialized by the session, so a longer one is refused with
# the node named instead of exhausting memory (TF's own bound is int64's maximum).
MAX_RANGE_ELEMENTS = 2**31 - 1
_INT64_MAX = 2**63 - 1


def _scalars(start, limit, delta) -> tuple[np.generic, np.generic, np.generic]:
    return tuple(np.asarray(v).reshape(-1)[0] for v in (start, limit, delta))


def range_length(node: str, start, limit, delta) -> int:
    """The element count of Range(start, limit, delta) (one-element arrays of one dtype), checked as TF checks it."""
    start, limit, delta = _scalars(start, limit, delta)
    if delta == 0:
        raise GraphError(f"Range {node!r}: delta must not be 0")
    if (delta > 0 and not start <= limit) or (not delta > 0 and not start >= limit):
        raise GraphError(f"Range {node!r}: delta {delta} does not go from start {start} towards limit {limit} "
                         f"(TF requires start <= limit when delta > 0, else start >= limit)")
    if start.dtype.kind in "iu":
        count = -(-abs(int(limit) - int(start)) // abs(int(delta)))
    else:
        with np.errstate(all="ignore"):
            quotient = float(np.abs((limit - start) / delta))  # in the dtype, as TF's kernel divides
        if not quotient <= _INT64_MAX:
            raise GraphError(f"Range {node!r}: (limit - start) / delta is {quotient}; TF requires a number <= "
                             f"{_INT64_MAX}")
        count = math.ceil(quotient)
    if count > MAX_RANGE_ELEMENTS:
        raise GraphError(f"Range {node!r}: start {start}, limit {limit}, delta {delta} give {count} elements; "
                         f"graph_ir holds at most {MAX_RANGE_ELEMENTS}")
    return count


def range_values(node: str, start, limit, delta) -> np.ndarray:
    """start + T(i) * delta for i < range_length, in the dtype T (integers wrap as TF's do; the results fit)."""
    count = range_length(node, start, limit, delta)
    first, _, step = _scalars(start, limit, delta)
    with np.errstate(all="ignore"):
        return first + np.arange(count).astype(first.dtype) * step
