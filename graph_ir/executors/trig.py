"""The trigonometric family's executors (prototypes: graph_ir/opset/trig.py). float32 and the 16-bit floats are
computed in float64 and rounded once to the output dtype: the correctly rounded result, barring a rare tie; TF's CPU
kernels use Eigen's float32 approximations (patan, pasin/pacos, patanh) or the C library's float functions (tanf,
sinhf, coshf, asinhf, acoshf), a few ulps from it, so the lowering tests compare within a stated tolerance, not
bitwise. float64 runs in NumPy's float64 functions. NaN stays NaN; the domain edges give what IEEE's (and TF's)
functions give: acos(+-1) = 0 and pi, acosh(1) = 0, atanh(+-1) = +-inf, and NaN outside [-1, 1] (acos, asin,
atanh) or below 1 (acosh); sinh and cosh overflow to inf, tan(+-inf) is NaN."""

from __future__ import annotations

import numpy as np

from graph_ir.executors.common import Executor, at_dtype
from graph_ir.ir.nodes import Node


def _in_float64(a: np.ndarray) -> np.ndarray:
    """float16, bfloat16 and float32 as float64 (every such value is exact there); float64 as given."""
    return a.astype(np.float64) if a.dtype.kind in "fV" and a.dtype.itemsize <= 4 else a


def _rounded_once(fn) -> Executor:
    """fn over the inputs in float64, rounded once to the node's output dtype."""

    def run(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            return [at_dtype(node, 0, fn(*[_in_float64(a) for a in args]))]

    return run


_FUNCTIONS = {"Acos": np.arccos, "Asin": np.arcsin, "Atan": np.arctan, "Atan2": np.arctan2, "Tan": np.tan,
              "Sinh": np.sinh, "Cosh": np.cosh, "Asinh": np.arcsinh, "Acosh": np.arccosh, "Atanh": np.arctanh}

EXECUTORS: dict[str, Executor] = {t: _rounded_once(fn) for t, fn in _FUNCTIONS.items()}
