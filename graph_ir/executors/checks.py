"""The checks family's executors (prototypes: graph_ir/opset/checks.py)."""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Node


def _check_numerics(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """TF's CheckNumerics kernel: InvalidArgument naming what it found (NaN before Inf), else x unchanged."""
    x = args[0]
    found = [what for what, test in (("NaN", np.isnan), ("Inf", np.isinf)) if test(x).any()]
    if found:
        raise GraphError(f"CheckNumerics {node.name!r}: {node.attrs['message']} : Tensor had {' and '.join(found)} "
                         "values")
    return [x]


def _assert(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """Checked when the graph was built (graph_ir/opset/checks.py); checked again, as TF's Assert kernel does."""
    if not np.all(args[0]):
        raise GraphError(f"Assert {node.name!r}: assertion failed")
    return []


EXECUTORS = {"CheckNumerics": _check_numerics, "Assert": _assert}
