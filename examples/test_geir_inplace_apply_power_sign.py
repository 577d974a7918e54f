"""The flow of CANN's GE-IR sample for InplaceApplyPowerSign (ops-nn examples/arch35/test_geir_inplace_apply_power_sign.cpp),
on graph_ir: Data inputs in IR order (var, m, lr, logbase, sign_decay, beta, grad), shape {8} tensors and {1}
scalars, build the graph, add it to a session, run it, save it. Unlike the CANN sample, every output is compared
with a float64 golden, and the script exits non-zero on a mismatch.

    python examples/test_geir_inplace_apply_power_sign.py [--dtype float32|float16|bfloat16] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

import graph_ir
from graph_ir import ops
from graph_ir.ir.dtypes import as_dtype
from op_spec.reference import power_sign

IR_INPUTS = ("var", "m", "lr", "logbase", "sign_decay", "beta", "grad")
TENSOR_SHAPE, SCALAR_SHAPE = (8,), (1,)
# Relative tolerance per dtype: a few ulps of the storage type (the compute is float32).
RTOL = {"float32": 1e-6, "float16": 2e-3, "bfloat16": 1.6e-2}


def make_inputs(dtype: str) -> list[np.ndarray]:
    rng = np.random.default_rng(8)
    t = as_dtype(dtype).numpy
    var = rng.standard_normal(TENSOR_SHAPE)
    m = rng.standard_normal(TENSOR_SHAPE)
    grad = rng.standard_normal(TENSOR_SHAPE)
    grad[3] = 0.0  # sign 0: the exponent's factor is exp(0) = 1
    m[5] = -grad[5]  # signs disagree
    scalars = {"lr": 0.1, "logbase": np.log(2.0), "sign_decay": 0.75, "beta": 0.9}
    values = {"var": var, "m": m, "grad": grad, **{k: np.full(SCALAR_SHAPE, v) for k, v in scalars.items()}}
    return [np.asarray(values[name], dtype=t) for name in IR_INPUTS]


def golden(inputs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """float64 PowerSign from the inputs as stored (the same rounding of the scalars as the kernel sees)."""
    var, m, lr, logbase, sign_decay, beta, grad = inputs
    return power_sign(var, m, *(float(np.asarray(x, np.float64).reshape(-1)[0]) for x in (lr, logbase, sign_decay, beta)),
                      grad)


def build(dtype: str) -> graph_ir.Graph:
    graph = graph_ir.Graph("tc_ge_irrun_test")
    with graph:
        placeholders = [
            graph_ir.Data(index=i, dtype=dtype, shape=SCALAR_SHAPE if name in ("lr", "logbase", "sign_decay", "beta")
                          else TENSOR_SHAPE, name=f"placeholder{i + 1}")
            for i, name in enumerate(IR_INPUTS)
        ]
        var, m = ops.InplaceApplyPowerSign(*placeholders, use_locking=False, name="applyPowerSignD1")
        graph.set_outputs([var, m])
    return graph


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float32", choices=sorted(RTOL))
    parser.add_argument("--out", default=None, help="directory for the saved graph (default: a temporary one)")
    args = parser.parse_args()
    graph = build(args.dtype)
    session = graph_ir.Session()
    session.add_graph(0, graph)
    inputs = make_inputs(args.dtype)
    var_out, m_out = session.run_graph(0, inputs)
    out_dir = args.out or tempfile.mkdtemp(prefix="geir_power_sign_")
    os.makedirs(out_dir, exist_ok=True)
    for ext in ("air", "pbtxt"):
        graph.save(os.path.join(out_dir, f"{graph.name}.{ext}"))
    print(f"graph saved to {out_dir}/{graph.name}.{{air,pbtxt}}; kernels ISA: {graph_ir.kernels.isa()}")
    want_var, want_m = golden(inputs)
    failed = False
    for name, got, want in (("var", var_out, want_var), ("m", m_out, want_m)):
        got64 = got.astype(np.float64)
        err = np.abs(got64 - want) / np.maximum(np.abs(want), 1e-30)
        ok = bool(np.all(err <= RTOL[args.dtype]))
        failed |= not ok
        for i, (g, w) in enumerate(zip(got64, want)):
            print(f"  {name}[{i}] = {g: .8g}   golden {w: .8g}")
        print(f"{name}: max relative error {err.max():.3g} (tolerance {RTOL[args.dtype]:g}) -> {'PASS' if ok else 'FAIL'}")
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
