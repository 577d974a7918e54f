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


EXECUTORS: dict[str, Executor] = {
    "InplaceApplyPowerSign": _power_sign,
    "ApplyFusedEmaAdam": _fused_ema_adam,
    "Identity": _identity,
    "Cast": lambda node, args: [args[0].astype(node.attrs["dst_type"].numpy)],
    "Reshape": lambda node, args: [args[0].reshape(node.output_descs[0].shape)],
}

# Ops whose outputs are new arrays (they count toward a run's memory); the others alias an input.
ALLOCATING = frozenset({"Cast"})
# Ops whose output aliases input 0 (a view or the same array).
ALIASING = frozenset({"Identity", "Reshape"})
