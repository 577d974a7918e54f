"""Input checks of the Keras optimizers, run in Python before anything is written: scalar hyper-parameters, the
variables' dtypes (from op_spec), variables given twice, variables the optimizer does not own, gradient shapes, and
the float16 epsilon warning. Each error names the argument or variable, what it got and what was expected."""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

# In float16, (1 - beta_2) * g^2 underflows to 0 for |g| below about 5e-3 while m does not, and the step is then
# lr * m / epsilon. Measured on a float16 MLP (tests/optimizers/test_keras_float16.py): the default 1e-8 gives NaN in
# the second epoch, 1e-7 trains with 4-7x the loss, 1e-6 and more train well.
FLOAT16_MIN_EPSILON = 1e-6


def variable_name(variable: Any) -> str:
    """A variable's name as users know it: its Keras path ("dense/kernel") or TF name (without TF's ":0")."""
    name = getattr(variable, "path", None) or getattr(variable, "name", None) or type(variable).__name__
    return name.rsplit(":", 1)[0] if name.rsplit(":", 1)[-1].isdigit() else name


def describe(variable: Any) -> str:
    """A variable as users know it: its name, shape and dtype."""
    return f"{variable_name(variable)!r} (shape {tuple(variable.shape)}, {tf.as_dtype(variable.dtype).name})"


def scalar_argument(name: str, value: Any) -> float:
    """`value` as a Python float, or an error naming the argument: a TypeError for a non-number, a ValueError for
    a non-scalar array or tensor (the op takes one number per argument)."""
    if isinstance(value, (bool, str, bytes)):
        raise TypeError(f"{name} must be a float, got {type(value).__name__} {value!r}")
    shape = getattr(value, "shape", None)
    if shape is not None:
        shape = tuple(shape)
        if shape != ():
            raise ValueError(f"{name} must be a scalar (one float), got {type(value).__name__} of shape {shape}")
        if isinstance(value, tf.Tensor) and not hasattr(value, "numpy"):
            raise ValueError(f"{name} must be a number known when the optimizer is created, got the symbolic "
                             f"tensor {value!r}")
        value = np.asarray(value).item()
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{name} must be a float, got {type(value).__name__} {value!r}")
    return float(value)


def check_dtypes(optimizer: str, variables: Sequence[Any], supported: Sequence[str], op: str) -> None:
    """Refuses (at build) a variable whose dtype the optimizer's op does not register."""
    for variable in variables:
        dtype = tf.as_dtype(variable.dtype).name
        if dtype not in supported:
            raise ValueError(
                f"{optimizer} cannot update variable {describe(variable)}: its op {op} supports "
                f"{', '.join(supported)}, not {dtype}. Leave the variable out of the optimizer's variables or give "
                "its layer a supported dtype (e.g. dtype='float32').")


def check_unique(optimizer: str, variables: Sequence[Any], key) -> None:
    """Refuses a variable given twice (one apply_gradients call, build or swap_ema_weights): stock Keras would apply
    both gradients one after the other, the multi-tensor op refuses aliasing; here both layouts refuse."""
    seen: dict[Any, int] = {}
    for position, variable in enumerate(variables):
        first = seen.setdefault(key(variable), position)
        if first != position:
            raise ValueError(
                f"{optimizer} got variable {describe(variable)} twice (at positions {first} and {position}); each "
                "variable may appear once per call. Sum its gradients first.")


def check_gradient_shapes(optimizer: str, grads_and_vars: Sequence[tuple[Any, Any]]) -> list:
    """Checks every gradient's shape against its variable before any group is written. Static shapes are checked
    now (ValueError); for shapes known only when the step runs, returns checks (tensors) that the whole update,
    iterations included, must wait for."""
    checks = []
    for grad, var in grads_and_vars:
        if grad is None:
            continue
        sparse = isinstance(grad, tf.IndexedSlices)
        static = tf.TensorShape(grad.values.shape[1:]) if sparse else tf.TensorShape(grad.shape)
        want = tf.TensorShape(var.shape[1:]) if sparse else tf.TensorShape(var.shape)
        if not static.is_compatible_with(want):
            got = tuple(grad.values.shape) if sparse else tuple(grad.shape)
            raise ValueError(f"{optimizer}: the gradient of variable {describe(var)} has shape {got}; expected "
                             f"{tuple(var.shape)}. Nothing was updated.")
        if not sparse and not static.is_fully_defined():
            op_name = "gradient_shape_of_" + variable_name(var).replace("/", "_").replace(":", "_")
            checks.append(tf.ensure_shape(grad, want, name=op_name))
    return checks


def warn_float16_epsilon(optimizer: str, variables: Sequence[Any], epsilon: float) -> None:
    """A float16 variable with an epsilon below FLOAT16_MIN_EPSILON trains to NaN: warn at build."""
    if epsilon >= FLOAT16_MIN_EPSILON:
        return
    names = [describe(v) for v in variables if tf.as_dtype(v.dtype) == tf.float16]
    if names:
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        warnings.warn(
            f"{optimizer} has epsilon={epsilon:g} and float16 variables ({shown}): in float16, v underflows to 0 for "
            f"small gradients, and an epsilon below {FLOAT16_MIN_EPSILON:g} then gives huge steps and NaN. Pass "
            f"epsilon={FLOAT16_MIN_EPSILON:g} or more (or keep the variables in float32, as Keras's "
            "mixed_float16 policy does).", UserWarning, stacklevel=3)


def not_owned_error(optimizer: str, variable: Any, count: int) -> ValueError:
    return ValueError(
        f"{optimizer} has no state for variable {describe(variable)}: it was built for {count} other variables (the "
        "trainable variables of its first step, or of opt.build(...)). Pass one of those, e.g. from "
        "model.trainable_variables of the model it trains.")


def layout_mismatch_error(optimizer: str, saved_flat: bool, flat: bool, where: str) -> ValueError:
    return ValueError(
        f"{where} holds {optimizer}'s state saved with flat_state={saved_flat}, but this optimizer has "
        f"flat_state={flat}: the layouts store the slots differently (one variable per dtype and slot vs one per "
        f"model variable and slot). Create the optimizer with flat_state={saved_flat} to load it. Nothing of the "
        "optimizer was restored.")
