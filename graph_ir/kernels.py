"""The eager face of the Ascend operators (the aclnn style): in-place calls on NumPy arrays, running the same C++
kernels as the TF ops (kernels/, through the pybind11 binding graph_ir._binding).

Arrays: float32, float16, float64 (PowerSign only) or ml_dtypes.bfloat16, in native byte order, C-contiguous,
writable where updated, of one dtype and shape, and no updated array sharing memory with another (also through two
mappings of one file). Anything else raises TypeError (a wrong type or dtype) or ValueError (a shape, layout or
value) naming the argument, before anything is written. The binding checks the buffers again on its side.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

import op_spec
from graph_ir import _binding
from graph_ir.ir.dtypes import as_dtype
from graph_ir.runtime.aliasing import check_no_file_aliasing
from op_spec.checks import check_attrs, check_input_value


def isa() -> str:
    """The SIMD path the kernels use in this process ("avx512bf16", "avx512", "avx2" or "portable")."""
    return _binding.isa()


def _raw(a: np.ndarray) -> np.ndarray:
    """A view the buffer protocol can export (NumPy cannot export ml_dtypes' bfloat16 format)."""
    return a.view(np.uint16) if a.dtype.itemsize == 2 and a.dtype.kind == "V" else a


def _dtype_name(array: np.ndarray) -> str:
    try:
        return as_dtype(array.dtype).name
    except TypeError:
        return str(array.dtype)


def _check_arrays(op: str, arrays: dict[str, Any], written: tuple[str, ...], allowed: tuple[str, ...]) -> str:
    """All arrays: exactly ndarray-backed, one allowed dtype in native byte order, one shape, C-contiguous; the written
    ones writable and not overlapping any other. Returns the dtype name."""
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
        if not a.dtype.isnative:
            raise ValueError(f"{op}: {name} has non-native byte order ({a.dtype.str}); convert it with "
                             f"a.astype(a.dtype.newbyteorder('='))")
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
    check_no_file_aliasing(op, arrays, written)
    return dtype


def _scalar(op: str, name: str, value: Any, dtype: str) -> float:
    """A one-element array or a Python number, rounded to `dtype` and widened back (as the TF op reads it)."""
    if isinstance(value, np.ndarray) and _dtype_name(value) != dtype:
        raise TypeError(f"{op}: {name} has dtype {_dtype_name(value)}; expected {dtype} (the dtype of var)")
    array = np.asarray(value)
    if array.size != 1 or array.shape not in ((), (1,)):
        raise ValueError(f"{op}: {name} must be a scalar (shape [] or [1]), got shape {list(array.shape)}")
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
    dtype = _check_arrays(op, {"var": var, "m": m, "grad": grad}, ("var", "m"), op_spec.POWER_SIGN.dtypes)
    scalars = [_scalar(op, n, v, dtype) for n, v in
               (("lr", lr), ("logbase", logbase), ("sign_decay", sign_decay), ("beta", beta))]
    _binding.power_sign(dtype, _raw(var), _raw(m), _raw(grad), *scalars)


_FEA = op_spec.FUSED_EMA_ADAM
_FEA_ATTRS = {a.name: a.default for a in _FEA.ge_attrs}
# The binding's scalar arguments after step, in its order.
_FEA_SCALARS = ("lr", "ema_decay", "beta1", "beta2", "eps", "mode", "bias_correction", "weight_decay")


def _step_value(op: str, step: Any) -> int:
    if isinstance(step, np.ndarray):
        if step.dtype != np.int64:
            raise TypeError(f"{op}: step must be int64, got dtype {step.dtype}")
        if step.size != 1 or step.shape not in ((), (1,)):
            raise ValueError(f"{op}: step must have one element (shape [] or [1]), got shape {list(step.shape)}")
        return int(step.reshape(()))
    if isinstance(step, (int, np.integer)) and not isinstance(step, (bool, np.bool_)):
        if not -(2**63) <= int(step) < 2**63:
            raise ValueError(f"{op}: step must fit in int64, got {step}")
        return int(step)
    raise TypeError(f"{op}: step must be an int64 array or an int, got {type(step).__name__}")


def apply_fused_ema_adam(grad, var, m, v, s, step, **attrs) -> None:
    """FusedEmaAdam in place on var, m, v, s (GE ApplyFusedEmaAdam; aclnnApplyFusedEmaAdam), in float32:

        (c1, c2) = (1 - beta1^step, 1 - beta2^step) if bias_correction else (1, 1)
        g = grad + weight_decay * var  (mode 0, L2);   m = beta1*m + (1-beta1)*g;   v = beta2*v + (1-beta2)*g^2
        var -= lr * ((m/c1) / (sqrt(v/c2) + eps) [+ weight_decay * var_old in mode 1, AdamW])
        s = ema_decay * s + (1 - ema_decay) * var

    grad, var, m, v, s: arrays of one dtype (float16, bfloat16, float32) and shape; step: an int64 array of one
    element (shape [] or [1]) or a Python int, >= 1 when bias_correction. The keyword attributes (lr, ema_decay,
    beta1, beta2, eps, mode, bias_correction, weight_decay) and their defaults are op_spec.FUSED_EMA_ADAM's.
    """
    op = "apply_fused_ema_adam"
    unknown = sorted(set(attrs) - set(_FEA_ATTRS))
    if unknown:
        raise TypeError(f"{op}: unexpected keyword argument(s) {', '.join(unknown)}; it takes "
                        f"{', '.join(_FEA_ATTRS)}")
    dtype = _check_arrays(op, {"grad": grad, "var": var, "m": m, "v": v, "s": s}, ("var", "m", "v", "s"),
                          _FEA.dtypes)
    step = _step_value(op, step)
    try:
        values = check_attrs(_FEA, {**_FEA_ATTRS, **attrs})
        check_input_value(_FEA, "step", step, values)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{op}: {e}") from None
    _binding.fused_ema_adam(dtype, *(_raw(a) for a in (grad, var, m, v, s)), step, *(values[n] for n in _FEA_SCALARS))


apply_fused_ema_adam.__signature__ = inspect.Signature(
    [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in ("grad", "var", "m", "v", "s", "step")]
    + [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d) for n, d in _FEA_ATTRS.items()])


# The Session's lean path: its executors call the binding through these, with the attributes checked once per set of
# attributes (a node's are fixed once its graph is verified) and the arrays checked cheaply on each call (the
# Session verified their dtypes and shapes; the binding checks the buffers: format, C-contiguity, writability,
# element counts, overlap). The public functions above keep their full checks.
_KERNEL_DTYPES = {np.dtype(as_dtype(n).numpy): n for n in ("float32", "float16", "bfloat16", "float64")}


def _same_arrays(op: str, arrays: tuple[np.ndarray, ...], names: tuple[str, ...], allowed: tuple[str, ...]) -> str:
    """The arrays' one dtype name (in `allowed`), checking type, dtype and shape against the first."""
    first = arrays[0]
    dtype = _KERNEL_DTYPES.get(first.dtype) if isinstance(first, np.ndarray) else None
    if dtype not in allowed:
        return _check_arrays(op, dict(zip(names, arrays)), (), allowed)  # raises naming what is wrong
    for a in arrays:
        if not isinstance(a, np.ndarray) or a.dtype != first.dtype or a.shape != first.shape:
            return _check_arrays(op, dict(zip(names, arrays)), (), allowed)
    return dtype


_FEA_ARRAYS = ("grad", "var", "m", "v", "s")
_FEA_WRITTEN = ("var", "m", "v", "s")


@functools.lru_cache(maxsize=1024)
def prepared_fused_ema_adam(attrs: tuple[tuple[str, type, Any], ...]) -> Callable[..., None]:
    """apply_fused_ema_adam(grad, var, m, v, s, step) with the attributes `attrs` ((name, type, value) triples, the
    type keeping the cache from taking True for 1) checked here, once."""
    op = "apply_fused_ema_adam"
    given = {name: value for name, _, value in attrs}
    unknown = sorted(set(given) - set(_FEA_ATTRS))
    if unknown:
        raise TypeError(f"{op}: unexpected attribute(s) {', '.join(unknown)}; it takes {', '.join(_FEA_ATTRS)}")
    try:
        values = check_attrs(_FEA, {**_FEA_ATTRS, **given})
    except (TypeError, ValueError) as e:
        raise type(e)(f"{op}: {e}") from None
    scalars = tuple(values[n] for n in _FEA_SCALARS)
    step_spec = _FEA.input("step")
    step_rule = step_spec.rule if step_spec.rule_when is None or values.get(step_spec.rule_when, True) else None

    def run(grad, var, m, v, s, step) -> None:
        arrays = (grad, var, m, v, s)
        dtype = _same_arrays(op, arrays, _FEA_ARRAYS, _FEA.dtypes)
        step = _step_value(op, step)
        if step_rule is not None and not step_rule.accepts(step):
            try:
                check_input_value(_FEA, "step", step, values)  # raises with the rule's message
            except ValueError as e:
                raise ValueError(f"{op}: {e}") from None
        if any(a.base is not None for a in arrays):  # NumPy's own allocations map no file
            check_no_file_aliasing(op, dict(zip(_FEA_ARRAYS, arrays)), _FEA_WRITTEN)
        _binding.fused_ema_adam(dtype, *(_raw(a) for a in arrays), step, *scalars)

    return run


_POWER_SIGN_ARRAYS = ("var", "m", "grad", "lr", "logbase", "sign_decay", "beta")


def lean_power_sign(var, m, grad, lr, logbase, sign_decay, beta) -> None:
    """inplace_apply_power_sign with the scalars (one-element arrays of var's dtype) checked cheaply."""
    op = "inplace_apply_power_sign"
    dtype = _same_arrays(op, (var, m, grad), _POWER_SIGN_ARRAYS[:3], op_spec.POWER_SIGN.dtypes)
    scalars = (lr, logbase, sign_decay, beta)
    for name, a in zip(_POWER_SIGN_ARRAYS[3:], scalars):
        if not isinstance(a, np.ndarray) or a.dtype != var.dtype or a.size != 1:
            _scalar(op, name, a, dtype)  # raises naming what is wrong
    if var.base is not None or m.base is not None or grad.base is not None:  # NumPy's own allocations map no file
        check_no_file_aliasing(op, {"var": var, "m": m, "grad": grad}, ("var", "m"))
    _binding.power_sign(dtype, _raw(var), _raw(m), _raw(grad), *(float(a.reshape(())) for a in scalars))
