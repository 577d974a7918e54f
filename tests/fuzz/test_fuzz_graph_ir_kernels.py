"""Hostile-input fuzzing (hypothesis) of graph_ir.kernels: wrong dtypes and shapes, read-only, strided, aliased
arrays and lists. The property: TypeError / ValueError with every array bitwise unchanged, or success."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import strategies as st

from graph_ir import kernels
from tests.helpers.fuzzing import FLOATS, OTHER, arrays, fuzz, same_bits, shapes


@st.composite
def kernel_case(draw):
    op = draw(st.sampled_from(["power_sign", "fused"]))
    dtype = draw(st.sampled_from(FLOATS + OTHER))
    shape = draw(shapes)
    count = 3 if op == "power_sign" else 5
    dtypes = [dtype] * count
    shapes_ = [shape] * count
    mutate = draw(st.sampled_from(["none"] * 4 + ["dtype", "shape", "readonly", "strided", "list", "alias"]))
    if mutate == "dtype":
        dtypes[draw(st.integers(0, count - 1))] = draw(st.sampled_from(FLOATS + OTHER))
    if mutate == "shape":
        shapes_[draw(st.integers(0, count - 1))] = draw(shapes)
    arrs = [draw(arrays(d, s)) for d, s in zip(dtypes, shapes_)]
    return {"op": op, "arrays": arrs, "mutate": mutate, "which": draw(st.integers(0, count - 1)),
            "scalars": [draw(st.sampled_from([0.1, np.float32(0.5), np.ones(2), np.ones((1, 1)), "x", np.nan]))
                        for _ in range(4)],
            "step": draw(st.sampled_from([1, 0, -3, np.array([5], np.int64), np.array([5], np.int32), 2.5, True])),
            "mode": draw(st.sampled_from([0, 1, 2, True]))}


def _run_kernels(case) -> str:
    arrs = [np.array(a, copy=True) for a in case["arrays"]]
    k = case["which"]
    if case["mutate"] == "readonly":
        arrs[k].flags.writeable = False
    elif case["mutate"] == "strided":
        arrs[k] = np.repeat(arrs[k], 2, axis=-1)[..., ::2] if arrs[k].ndim else arrs[k]
    elif case["mutate"] == "list":
        arrs[k] = arrs[k].tolist()
    elif case["mutate"] == "alias":
        arrs[k] = arrs[(k + 1) % len(arrs)]
    before = [np.array(a, copy=True) for a in arrs if isinstance(a, np.ndarray)]
    try:
        with np.errstate(all="ignore"):
            if case["op"] == "power_sign":
                var, m, grad = arrs
                kernels.inplace_apply_power_sign(var, m, *case["scalars"], grad)
            else:
                kernels.apply_fused_ema_adam(*arrs, case["step"], mode=case["mode"])
    except (TypeError, ValueError):
        for a, b in zip([a for a in arrs if isinstance(a, np.ndarray)], before):
            same_bits(a, b)
        return "error"
    return "ok"


@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["bounded", "slow"])
def test_fuzz_graph_ir_kernels(slow):
    assert "error" in fuzz(kernel_case(), _run_kernels, slow)
