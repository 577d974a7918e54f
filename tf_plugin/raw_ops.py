"""Raw-op mirrors of tf.raw_ops.ApplyPowerSign / ResourceApplyPowerSign, plus FusedEmaAdam. Keyword-only."""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.python.ops import control_flow_util

from tf_plugin import op_library
from tf_plugin.signatures import FUSED_EMA_ADAM, FUSED_EMA_ADAM_LR_DEFAULT, POWER_SIGN


def _invalid(message: str) -> tf.errors.InvalidArgumentError:
    return tf.errors.InvalidArgumentError(None, None, message)


def _check_not_xla(op: str) -> None:
    """Our ops have CPU kernels only: say so before XLA fails with a wall of text about unsupported ops."""
    if control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()):
        raise ValueError(
            f"tf_plugin's {op} has no XLA kernel, so it cannot run inside an XLA-compiled function. Compile without "
            "XLA: `model.compile(..., jit_compile=False)` for Keras, or `tf.function(jit_compile=False)`."
        )


def _handle(var: Any) -> Any:
    """A resource handle; a tf.Variable is accepted for its handle. Inside a tf.function the variable is also
    recorded on the function's graph (as reading it would), so ConcreteFunction.variables lists it."""
    if isinstance(var, tf.Variable):
        graph = tf.compat.v1.get_default_graph()
        if hasattr(graph, "watch_variable"):
            graph.watch_variable(var)
        return var.handle
    return var


def _check_dtype(dtype: tf.DType, allowed: tuple[str, ...], what: str) -> tf.DType:
    if dtype.name not in allowed:
        raise _invalid(f"{what} has dtype {dtype.name}; expected one of {', '.join(allowed)}")
    return dtype


def _as_tensor(value: Any, dtype: tf.DType, name: str, because: str) -> tf.Tensor:
    """Python numbers and arrays are converted to dtype; a tensor of another dtype is an error naming `name`."""
    if isinstance(value, (tf.Tensor, tf.Variable)) and value.dtype.base_dtype != dtype:
        raise _invalid(f"{name} has dtype {value.dtype.base_dtype.name}, expected {dtype.name} ({because})")
    return tf.convert_to_tensor(value, dtype=dtype, name=name)


def _grad_dtype(grad: Any) -> tf.DType:
    return grad.dtype.base_dtype if isinstance(grad, (tf.Tensor, tf.Variable)) else tf.convert_to_tensor(grad).dtype


def _power_sign_inputs(dtype: tf.DType, lr, logbase, sign_decay, beta, grad) -> dict[str, tf.Tensor]:
    _check_dtype(dtype, POWER_SIGN.dtypes, "var")
    because = f"all PowerSign tensors share T = {dtype.name}"
    values = {"lr": lr, "logbase": logbase, "sign_decay": sign_decay, "beta": beta, "grad": grad}
    return {k: _as_tensor(v, dtype, k, because) for k, v in values.items()}


def ApplyPowerSign(*, var, m, lr, logbase, sign_decay, beta, grad, use_locking=False, name=None):
    """PowerSign on ref variables (tf.compat.v1 graphs); returns the updated var, as tf.raw_ops.ApplyPowerSign.

    m_t = beta * m + (1 - beta) * grad;  var_t = var - lr * exp(logbase * sign_decay * sign(m_t) * sign(grad)) * grad

    Args:
      var, m: ref variables of dtype T in {float16, bfloat16, float32, float64}, same shape; updated in place.
      lr, logbase, sign_decay, beta: scalars of shape [] or [1] (Python floats are converted to T).
      grad: the gradient, same shape as var.
      use_locking: lock var and m during the update.
    """
    _check_not_xla("ApplyPowerSign")
    inputs = _power_sign_inputs(var.dtype.base_dtype, lr, logbase, sign_decay, beta, grad)
    return op_library.tf_plugin_apply_power_sign(var=var, m=m, use_locking=use_locking, name=name, **inputs)


def ResourceApplyPowerSign(*, var, m, lr, logbase, sign_decay, beta, grad, use_locking=False, name=None):
    """PowerSign on resource variables, in place; eager, tf.function and graph mode. Returns the op (None in eager).

    m_t = beta * m + (1 - beta) * grad;  var_t = var - lr * exp(logbase * sign_decay * sign(m_t) * sign(grad)) * grad

    Args:
      var, m: resource handles (``v.handle``; a tf.Variable is accepted) of variables of dtype T.
      lr, logbase, sign_decay, beta: scalars of shape [] or [1]; Python floats are converted to T, the dtype of grad.
      grad: the gradient, dtype T in {float16, bfloat16, float32, float64}, same shape as var.
      use_locking: accepted for parity with stock; dense resource updates always lock the variables.
    """
    _check_not_xla("ResourceApplyPowerSign")
    inputs = _power_sign_inputs(_grad_dtype(grad), lr, logbase, sign_decay, beta, grad)
    return op_library.tf_plugin_resource_apply_power_sign(
        var=_handle(var), m=_handle(m), use_locking=use_locking, name=name, **inputs
    )


_FEA = FUSED_EMA_ADAM.defaults


def _fused_ema_adam_inputs(dtype: tf.DType, grad, step, lr) -> dict[str, tf.Tensor]:
    _check_dtype(dtype, FUSED_EMA_ADAM.dtypes, "grad")
    return {
        "grad": _as_tensor(grad, dtype, "grad", f"the variables' dtype is {dtype.name}"),
        "step": _as_tensor(step, tf.int64, "step", "step is an int64 step count"),
        "lr": _as_tensor(lr, tf.float32, "lr", "lr is a float32 tensor"),
    }


def ApplyFusedEmaAdam(
    *, var, m, v, s, grad, step, lr=FUSED_EMA_ADAM_LR_DEFAULT, ema_decay=_FEA["ema_decay"], beta1=_FEA["beta1"],
    beta2=_FEA["beta2"], eps=_FEA["eps"], mode=_FEA["mode"], bias_correction=_FEA["bias_correction"],
    weight_decay=_FEA["weight_decay"], use_locking=False, name=None,
):
    """FusedEmaAdam on ref variables; returns the updated var. See ResourceApplyFusedEmaAdam for the formula."""
    _check_not_xla("ApplyFusedEmaAdam")
    inputs = _fused_ema_adam_inputs(var.dtype.base_dtype, grad, step, lr)
    return op_library.tf_plugin_apply_fused_ema_adam(
        var=var, m=m, v=v, s=s, ema_decay=ema_decay, beta1=beta1, beta2=beta2, eps=eps, mode=mode,
        bias_correction=bias_correction, weight_decay=weight_decay, use_locking=use_locking, name=name, **inputs,
    )


def ResourceApplyFusedEmaAdam(
    *, var, m, v, s, grad, step, lr=FUSED_EMA_ADAM_LR_DEFAULT, ema_decay=_FEA["ema_decay"], beta1=_FEA["beta1"],
    beta2=_FEA["beta2"], eps=_FEA["eps"], mode=_FEA["mode"], bias_correction=_FEA["bias_correction"],
    weight_decay=_FEA["weight_decay"], use_locking=False, name=None,
):
    """Adam/AdamW fused with an EMA of the weights (CANN ApplyFusedEmaAdam), in place on resource variables.

    (c1, c2) = (1 - beta1^step, 1 - beta2^step) if bias_correction else (1, 1)
    g = grad + weight_decay * var if mode == 0 else grad
    m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
    var = var - lr * ((m / c1) / (sqrt(v / c2) + eps) [+ weight_decay * var if mode == 1])
    s = ema_decay s + (1 - ema_decay) var

    Args:
      var, m, v, s: resource handles of variables of dtype T in {float16, bfloat16, float32}, one shape.
      grad: the gradient (T, var's shape). step: int64 1-based step count, shape [] or [1].
      lr: float32 scalar tensor (may change every step). mode: 1 AdamW, 0 L2. Other hyper-parameters: attributes.
    """
    _check_not_xla("ResourceApplyFusedEmaAdam")
    inputs = _fused_ema_adam_inputs(_grad_dtype(grad), grad, step, lr)
    return op_library.tf_plugin_resource_apply_fused_ema_adam(
        var=_handle(var), m=_handle(m), v=_handle(v), s=_handle(s), ema_decay=ema_decay, beta1=beta1, beta2=beta2,
        eps=eps, mode=mode, bias_correction=bias_correction, weight_decay=weight_decay, use_locking=use_locking,
        name=name, **inputs,
    )
