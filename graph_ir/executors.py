"""How graph_ir.Session executes each GE op type: NumPy at the op's dtype for the plumbing, graph_ir.kernels for the
two optimizer ops (in place on the Variable's or RefData's own buffer)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graph_ir import kernels
from graph_ir.nodes import Node

# An executor gets the node and its input values (in IR order) and returns its output values.
Executor = Callable[[Node, list[np.ndarray]], list[np.ndarray]]


def _power_sign(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    var, m, lr, logbase, sign_decay, beta, grad = args
    kernels.inplace_apply_power_sign(var, m, lr.reshape(()), logbase.reshape(()), sign_decay.reshape(()),
                                     beta.reshape(()), grad)
    return [var, m]


def _fused_ema_adam(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    grad, var, m, v, s, step = args
    kernels.apply_fused_ema_adam(grad, var, m, v, s, step, **node.attrs)
    return [var, m, v, s]


def _identity(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    return [args[0]]  # the session copies it when its source may still be written in place (a snapshot)


def _at_dtype(node: Node, k: int, value) -> np.ndarray:
    """A result as an array of the node's output dtype (NumPy turns 0-d results into scalars)."""
    return np.asarray(value, dtype=node.output_descs[k].dtype.numpy)


def _elementwise(fn) -> Executor:
    def run(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        with np.errstate(all="ignore"):  # Inf and NaN flow as in TensorFlow
            return [_at_dtype(node, 0, fn(*args))]

    return run


def _floor_mod(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.mod(x, y)  # the sign of the divisor, as TF's FloorMod (NumPy's mod for floats and ints)


def _scaled(node: Node, x: np.ndarray) -> np.ndarray:
    """scale * x + shift of GE's Exp and Log (x itself for the defaults 1 and 0, what TF's ops lower to)."""
    a = node.attrs
    return x if (a["scale"], a["shift"]) == (1.0, 0.0) else x * a["scale"] + a["shift"]


def _exp(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    a, x = node.attrs, _scaled(node, args[0])
    with np.errstate(all="ignore"):
        y = np.exp(x) if a["base"] == -1.0 else np.power(np.asarray(a["base"], x.dtype), x)
    return [_at_dtype(node, 0, y)]


def _log(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    a, x = node.attrs, _scaled(node, args[0])
    with np.errstate(all="ignore"):
        y = np.log(x) if a["base"] == -1.0 else np.log(x) / np.log(np.asarray(a["base"], x.dtype))
    return [_at_dtype(node, 0, y)]


def _assign(op) -> Executor:
    """In place on the Variable's own buffer, like the GE ref ops."""

    def run(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        ref, value = args
        with np.errstate(all="ignore"):
            op(ref, value)
        return [ref]

    return run


_BINARY = {"Add": np.add, "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply, "RealDiv": np.divide,
           "Maximum": np.maximum, "Minimum": np.minimum, "Pow": np.power, "FloorMod": _floor_mod,
           "FloorDiv": np.floor_divide, "Less": np.less, "LessEqual": np.less_equal, "Greater": np.greater,
           "GreaterEqual": np.greater_equal, "Equal": np.equal, "NotEqual": np.not_equal}
_UNARY = {"Cos": np.cos, "Sin": np.sin, "Sqrt": np.sqrt, "Rsqrt": lambda x: 1 / np.sqrt(x), "Square": np.square,
          "Neg": np.negative, "Abs": np.abs, "Sign": np.sign, "Floor": np.floor}

EXECUTORS: dict[str, Executor] = {
    **{t: _elementwise(fn) for t, fn in {**_BINARY, **_UNARY}.items()},
    "Exp": _exp,
    "Log": _log,
    "Select": _elementwise(np.where),
    "SelectV2": _elementwise(np.where),
    "Assign": _assign(lambda ref, value: np.copyto(ref, value)),
    "AssignAdd": _assign(lambda ref, value: np.add(ref, value, out=ref)),
    "AssignSub": _assign(lambda ref, value: np.subtract(ref, value, out=ref)),
    "IdentityN": lambda node, args: list(args),
    "Fill": lambda node, args: [np.full(node.output_descs[0].shape, args[1].reshape(()),
                                        node.output_descs[0].dtype.numpy)],
    "InplaceApplyPowerSign": _power_sign,
    "ApplyFusedEmaAdam": _fused_ema_adam,
    "Identity": _identity,
    "Cast": lambda node, args: [args[0].astype(node.attrs["dst_type"].numpy)],
    "Reshape": lambda node, args: [args[0].reshape(node.output_descs[0].shape)],
}

# Ops whose outputs alias their inputs (a view or the same array); Identity and IdentityN are snapshots, which the
# session copies when their source may still be written in place. Ref ops write their ref input. All other
# executors allocate new arrays (they count toward a run's memory).
ALIASING = frozenset({"Identity", "Reshape", "IdentityN"})
SNAPSHOTS = frozenset({"Identity", "IdentityN"})
