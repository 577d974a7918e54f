"""The flow of CANN's aclnn sample for ApplyFusedEmaAdam (ops-nn examples/test_aclnn_apply_fused_ema_adam.cpp), on
graph_ir.kernels.apply_fused_ema_adam: grad, var, m, v and s are {1..8} as float32 of shape {2,2,2}; step is an int64
tensor {10} of shape {1} (the sample file's float vector of shape {2,2} is a bug; its doc version is right); the
attributes are lr=0.001, ema_decay=0.5, beta1=0.9, beta2=0.999, eps=1e-8, mode=1, bias_correction=True,
weight_decay=0.5. Unlike the sample, var, m, v and s are checked against a float64 golden; exits non-zero on a
mismatch.

    python examples/test_aclnn_apply_fused_ema_adam.py [--dtype float32|float16|bfloat16]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from graph_ir import kernels
from graph_ir.ir.dtypes import as_dtype
from op_spec.reference import fused_ema_adam

ATTRS = {"lr": 0.001, "ema_decay": 0.5, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "mode": 1,
         "bias_correction": True, "weight_decay": 0.5}
RTOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float32", choices=sorted(RTOL))
    args = parser.parse_args()
    t = as_dtype(args.dtype).numpy
    host = np.arange(1, 9, dtype=np.float64).reshape(2, 2, 2)
    grad, var, m, v, s = (host.astype(t) for _ in range(5))
    step = np.array([10], dtype=np.int64)
    want = fused_ema_adam(grad, var, m, v, s, step=int(step[0]), **ATTRS)[:4]  # float64, from the float32 attrs
    kernels.apply_fused_ema_adam(grad, var, m, v, s, step, **ATTRS)
    failed = False
    for name, got, w in zip(("var", "m", "v", "s"), (var, m, v, s), want):
        got64 = got.astype(np.float64)
        err = float(np.max(np.abs(got64 - w) / np.maximum(np.abs(w), 1e-30)))
        ok = err <= RTOL[args.dtype]
        failed |= not ok
        print(f"{name} = {got64.reshape(-1).tolist()}")
        print(f"  golden {np.round(w.reshape(-1), 9).tolist()}")
        print(f"  max relative error {err:.3g} (tolerance {RTOL[args.dtype]:g}) -> {'PASS' if ok else 'FAIL'}")
    print(f"kernels ISA: {kernels.isa()}; {'FAIL' if failed else 'PASS'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
