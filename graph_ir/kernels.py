"""The eager face of the Ascend operators (the aclnn style): in-place calls on NumPy arrays, running the same C++
kernels as the TF ops (kernels/, through the pybind11 module graph_ir._kernels).

Arrays: float32, float16, float64 (PowerSign only) or ml_dtypes.bfloat16, C-contiguous, writable where updated, of
one dtype and shape. Anything else raises TypeError (a wrong type or dtype) or ValueError (a shape, layout or value)
naming the argument, before anything is written.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graph_ir import _kernels
from graph_ir.dtypes import as_dtype
from tf_plugin.signatures import FUSED_EMA_ADAM, FUSED_EMA_ADAM_LR_DEFAULT, POWER_SIGN, check_fused_ema_adam_attrs

_FEA = FUSED_EMA_ADAM.defaults


def _raw(a: np.ndarray) -> np.ndarray:
    """A view the buffer protocol can export (NumPy cannot export ml_dtypes' bfloat16 format)."""
    return a.view(np.uint16) if a.dtype.itemsize == 2 else a


def isa() -> str:
    """The SIMD path the kernels use in this process ("avx512bf16", "avx512", "avx2" or "portable")."""
    return _kernels.isa()


def _dtype_name(array: np.ndarray) -> str:
    try:
        return as_dtype(array.dtype).name
    except TypeError:
        return str(array.dtype)


def _check_arrays(op: str, arrays: dict[str, Any], written: tuple[str, ...], allowed: tuple[str, ...]) -> str:
    """All arrays: ndarray, one allowed dtype, one shape, C-contiguous; the written ones writable and not
    overlapping any other. Returns the dtype name."""
    for name, a in arrays.items():
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{op}: {name} must be a NumPy array, got {type(a).__name__}")
    first_name, first = next(iter(arrays.items()))
    dtype = _dtype_name(first)
    if dtype not in allowed:
        raise TypeError(f"{op}: {first_name} has dtype {dtype}; expected one of {', '.join(allowed)}")
    for name, a in arrays.items():
        if _dtype_name(a) != dtype:
            raise TypeError(f"{op}: {name} has dtype {_dtype_name(a)} but {first_name} has {dtype}; they must match")
        if a.shape != first.shape:
            raise ValueError(f"{op}: {name} has shape {list(a.shape)} but {first_name} has {list(first.shape)}; "
                             "they must match")
        if not a.flags.c_contiguous:
            raise ValueError(f"{op}: {name} must be C-contiguous (use np.ascontiguousarray)")
    for name in written:
        if not arrays[name].flags.writeable:
            raise ValueError(f"{op}: {name} is updated in place but is not writable")
    names = list(arrays)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if (a in written or b in written) and arrays[a].size and np.shares_memory(arrays[a], arrays[b]):
                raise ValueError(f"{op}: {a} and {b} share memory; each updated array needs its own buffer")
    return dtype


def _scalar(op: str, name: str, value: Any, dtype: str) -> float:
    """A one-element array or a Python number, rounded to `dtype` and widened back (as the TF op reads it)."""
    array = np.asarray(value)
    if array.size != 1 or array.shape not in ((), (1,)):
        raise ValueError(f"{op}: {name} must be a scalar (shape [] or [1]), got shape {list(array.shape)}")
    if isinstance(value, np.ndarray) and _dtype_name(value) != dtype:
        raise TypeError(f"{op}: {name} has dtype {_dtype_name(value)}; expected {dtype} (the dtype of var)")
    if array.dtype.kind not in "fiub" and _dtype_name(array) != "bfloat16":
        raise TypeError(f"{op}: {name} must be a number, got dtype {array.dtype}")
    return float(array.astype(as_dtype(dtype).numpy).reshape(()).astype(np.float64))


def inplace_apply_power_sign(var, m, lr, logbase, sign_decay, beta, grad) -> None:
    """PowerSign in place on var and m (GE InplaceApplyPowerSign):

        m = beta * m + (1 - beta) * grad
        var -= lr * exp(logbase * sign_decay * sign(m) * sign(grad)) * grad

    var, m, grad: arrays of one dtype and shape; lr, logbase, sign_decay, beta: scalars (one-element arrays of that
    dtype, or Python numbers).
    """
    op = "inplace_apply_power_sign"
    dtype = _check_arrays(op, {"var": var, "m": m, "grad": grad}, ("var", "m"), POWER_SIGN.dtypes)
    scalars = [_scalar(op, n, v, dtype) for n, v in
               (("lr", lr), ("logbase", logbase), ("sign_decay", sign_decay), ("beta", beta))]
    _kernels.power_sign(dtype, _raw(var), _raw(m), _raw(grad), var.size, *scalars)


def _check_attrs(op: str, lr, ema_decay, beta1, beta2, eps, mode, bias_correction, weight_decay) -> None:
    """The TF op's checks (the ranges from tf_plugin.signatures), so both faces reject the same inputs."""
    floats = {"lr": lr, "ema_decay": ema_decay, "beta1": beta1, "beta2": beta2, "eps": eps,
              "weight_decay": weight_decay}
    for name, value in floats.items():
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
            raise TypeError(f"{op}: {name} must be a float, got {type(value).__name__}")
    try:
        check_fused_ema_adam_attrs({**floats, "mode": mode})
    except ValueError as e:
        raise ValueError(f"{op}: {e}") from None
    if not math.isfinite(lr):
        raise ValueError(f"{op}: lr must be finite, got {lr}")
    if not isinstance(bias_correction, (bool, np.bool_)):
        raise TypeError(f"{op}: bias_correction must be a bool, got {type(bias_correction).__name__}")


def apply_fused_ema_adam(grad, var, m, v, s, step, *, lr=FUSED_EMA_ADAM_LR_DEFAULT, ema_decay=_FEA["ema_decay"], beta1=_FEA["beta1"],
                         beta2=_FEA["beta2"], eps=_FEA["eps"], mode=_FEA["mode"],
                         bias_correction=_FEA["bias_correction"], weight_decay=_FEA["weight_decay"]) -> None:
    """FusedEmaAdam in place on var, m, v, s (GE ApplyFusedEmaAdam; aclnnApplyFusedEmaAdam), in float32:

        (c1, c2) = (1 - beta1^step, 1 - beta2^step) if bias_correction else (1, 1)
        g = grad + weight_decay * var  (mode 0, L2);   m = beta1*m + (1-beta1)*g;   v = beta2*v + (1-beta2)*g^2
        var -= lr * ((m/c1) / (sqrt(v/c2) + eps) [+ weight_decay * var_old in mode 1, AdamW])
        s = ema_decay * s + (1 - ema_decay) * var

    grad, var, m, v, s: arrays of one dtype (float16, bfloat16, float32) and shape; step: an int64 array of one
    element (shape [] or [1]) or a Python int, >= 1 when bias_correction.
    """
    op = "apply_fused_ema_adam"
    arrays = {"grad": grad, "var": var, "m": m, "v": v, "s": s}
    dtype = _check_arrays(op, arrays, ("var", "m", "v", "s"), FUSED_EMA_ADAM.dtypes)
    _check_attrs(op, lr, ema_decay, beta1, beta2, eps, mode, bias_correction, weight_decay)
    if isinstance(step, np.ndarray):
        if step.dtype != np.int64:
            raise TypeError(f"{op}: step must be int64, got dtype {step.dtype}")
        if step.size != 1 or step.shape not in ((), (1,)):
            raise ValueError(f"{op}: step must have one element (shape [] or [1]), got shape {list(step.shape)}")
        step_value = int(step.reshape(()))
    elif isinstance(step, (int, np.integer)) and not isinstance(step, bool):
        step_value = int(step)
    else:
        raise TypeError(f"{op}: step must be an int64 array or an int, got {type(step).__name__}")
    if bias_correction and step_value < 1:
        raise ValueError(f"{op}: step must be >= 1 when bias_correction is true, got {step_value}")
    _kernels.fused_ema_adam(dtype, *(_raw(a) for a in (grad, var, m, v, s)), var.size, step_value, float(lr), float(ema_decay),
                            float(beta1), float(beta2), float(eps), int(mode), bool(bias_correction),
                            float(weight_decay))
