"""How graph_ir.Session executes each GE op type: graph_ir.kernels for the two optimizer ops (in place on the
Variable's or RefData's own buffer), NumPy for the plumbing here and for the op families (one module each, beside
their prototypes in graph_ir/opset)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graph_ir import kernels
from graph_ir.distributed import collectives as hcom
from graph_ir.executors import (
    activation,
    array,
    bucketize,
    checks,
    conv,
    ctc,
    depthwise,
    fft,
    image,
    linalg,
    logic,
    math,
    matrix,
    nn,
    norm,
    pool,
    random,
    resize,
    scatter,
    segment,
    slicing,
    tensorlist,
    trig,
    valued,
)
from graph_ir.executors.common import Executor, c_ordered
from graph_ir.ir.nodes import Node


def _power_sign(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    var, m, lr, logbase, sign_decay, beta, grad = args
    # The kernels read C-ordered buffers; a computed gradient may come in another order (no copy when it is C).
    kernels.lean_power_sign(var, m, c_ordered(grad), lr, logbase, sign_decay, beta)
    return [var, m]


def _fused_ema_adam(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """Through the kernels' lean path: the node's attributes checked once per distinct set (cached by type and
    value: True and 1 are different keys)."""
    grad, var, m, v, s, step = args
    grad = c_ordered(grad)  # as _power_sign
    attrs = tuple((name, type(value), value) for name, value in node.attrs.items())
    try:
        hash(attrs)
    except TypeError:  # an attribute value no cache can key on: the public call checks (and names) it
        kernels.apply_fused_ema_adam(grad, var, m, v, s, step, **node.attrs)
    else:
        kernels.prepared_fused_ema_adam(attrs)(grad, var, m, v, s, step)
    return [var, m, v, s]


def _identity(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    return [args[0]]  # the session copies it when its source may still be written in place (a snapshot)


def _assign(op) -> Executor:
    """In place on the Variable's own buffer, like the GE ref ops."""

    def run(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        ref, value = args
        with np.errstate(all="ignore"):
            op(ref, value)
        return [ref]

    return run


EXECUTORS: dict[str, Executor] = {
    "Assign": _assign(lambda ref, value: np.copyto(ref, value)),
    "AssignAdd": _assign(lambda ref, value: np.add(ref, value, out=ref)),
    "AssignSub": _assign(lambda ref, value: np.subtract(ref, value, out=ref)),
    "IdentityN": lambda node, args: list(args),
    "InplaceApplyPowerSign": _power_sign,
    "ApplyFusedEmaAdam": _fused_ema_adam,
    "Identity": _identity,
    # From complex64 to a real dtype: the real part, as TF's Cast (NumPy would warn, then do the same).
    "Cast": lambda node, args: [(args[0].real if args[0].dtype.kind == "c" and node.attrs["dst_type"].name != "complex64"
                                 else args[0]).astype(node.attrs["dst_type"].numpy)],
    "Reshape": lambda node, args: [args[0].reshape(node.output_descs[0].shape)],
    "Empty": lambda node, args: [np.zeros(node.output_descs[0].shape, node.output_descs[0].dtype.numpy)],
    **math.EXECUTORS,
    **array.EXECUTORS,
    **nn.EXECUTORS,
    **norm.EXECUTORS,
    **conv.EXECUTORS,
    **pool.EXECUTORS,
    **activation.EXECUTORS,
    **logic.EXECUTORS,
    **matrix.EXECUTORS,
    **depthwise.EXECUTORS,
    **slicing.EXECUTORS,
    **resize.EXECUTORS,
    **random.EXECUTORS,
    **tensorlist.EXECUTORS,
    **fft.EXECUTORS,
    **image.EXECUTORS,
    **checks.EXECUTORS,
    **segment.EXECUTORS,
    **linalg.EXECUTORS,
    **scatter.EXECUTORS,
    **bucketize.EXECUTORS,
    **trig.EXECUTORS,
    **valued.EXECUTORS,
    **ctc.EXECUTORS,
    **hcom.EXECUTORS,  # through the running session's group (graph_ir/distributed)
}

# Ops whose outputs alias their inputs (a view or the same array); Identity and IdentityN are snapshots, which the
# session copies when their source may still be written in place. Ref ops write their ref input. All other
# executors allocate new arrays (they count toward a run's memory).
ALIASING = frozenset({"Identity", "Reshape", "IdentityN", "ExpandDims", "Squeeze", "CheckNumerics"})
SNAPSHOTS = frozenset({"Identity", "IdentityN"})

# Working memory an executor holds while it runs, beyond its inputs and outputs: {op type: fn(node) -> bytes}, an
# upper bound from the node's descs and attrs, which the session's planner adds at the node's position. Ops not
# listed (elementwise and plumbing) count 0.
WORKSPACE: dict[str, Callable[[Node], int]] = {**conv.WORKSPACE, **depthwise.WORKSPACE, **pool.WORKSPACE,
                                              **random.WORKSPACE, **matrix.WORKSPACE, **ctc.WORKSPACE,
                                              **hcom.WORKSPACE}
