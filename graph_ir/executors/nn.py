"""The nn family's executors (prototypes: graph_ir/opset/nn.py). Products accumulate in float32 (float16 and
bfloat16 are widened, then rounded once, as TF's CPU kernels do), but in BLAS's order, not Eigen's: not bitwise
TF's, within the tolerances the lowering tests state. Sums (BiasAddGrad, softmax's and the cross-entropy's
denominators) accumulate in float64 (reduce.accurate_sum), at least as close to the exact sum as TF's. Softmax and
the cross-entropy follow TF's CPU kernels' formulas (a max shift, then exp, and for softmax the product with the
reciprocal of the sum)."""

from __future__ import annotations

import numpy as np

from graph_ir.executors import onednn, threads
from graph_ir.executors.common import at_dtype, c_ordered, wide
from graph_ir.executors.einsum import einsum_product
from graph_ir.executors.reduce import accumulator, accurate_sum
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Node
from graph_ir.opset.nn import channel_axis, parse_einsum


def _matmul(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    a = node.attrs
    t1, t2 = (a["transpose_x1"], a["transpose_x2"]) if node.type == "MatMulV2" else (a["adj_x1"], a["adj_x2"])
    x1, x2 = wide(args[0]), wide(args[1])
    x1 = np.swapaxes(x1, -1, -2) if t1 else x1
    x2 = np.swapaxes(x2, -1, -2) if t2 else x2
    with np.errstate(all="ignore"):
        y = threads.matmul(x1, x2) if x1.ndim == x2.ndim == 2 else np.matmul(x1, x2)
        if len(args) > 2 and node.inputs[2] is not None:
            y = y + wide(args[2])
    return [at_dtype(node, 0, y)]


def _einsum(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    terms, out = parse_einsum(node.type, node.name, node.attrs["equation"], len(args))
    operands = [wide(a) for a in args]
    with np.errstate(all="ignore"):
        y = einsum_product(terms, out, *operands) if len(operands) == 2 else None  # TF's way: one batched product
        if y is None:
            y = np.einsum(f"{','.join(terms)}->{out}", *operands, optimize=True)
    # C order: np.einsum may hand back its product in another axis order, which every later op would carry along
    return [c_ordered(at_dtype(node, 0, y))]


def _bias_add(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, bias = args
    c = channel_axis(node.op, node.name, node.attrs, x.ndim)
    shape = [1] * x.ndim
    shape[c] = bias.size
    y = np.empty(x.shape, np.result_type(x, bias))
    rows = threads.slices(x.shape[0], threads.pieces_for(x.nbytes, threads.MIN_PASS_BYTES, x.shape[0]))
    with np.errstate(all="ignore"):  # in runs of the leading axis (never the channels), one per thread
        threads.run_parts(lambda run: np.add(x[run], bias.reshape(shape), out=y[run]), rows)
    return [at_dtype(node, 0, y)]


def _bias_add_grad(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x = wide(args[0])
    c = channel_axis(node.op, node.name, node.attrs, x.ndim)
    axes = tuple(k for k in range(x.ndim) if k != c)
    if c == x.ndim - 1:  # NHWC: the leading axes' float64 sums, threaded in accurate_sum
        with np.errstate(all="ignore"):
            return [at_dtype(node, 0, accurate_sum(x, axes))]
    y = np.empty(x.shape[c], accumulator(x) or x.dtype)
    channels = threads.slices(x.shape[c], threads.pieces_for(x.nbytes, threads.MIN_PASS_BYTES, x.shape[c]))
    with np.errstate(all="ignore"):  # each channel's sum in one part, as one thread sums it
        threads.run_parts(lambda run: np.copyto(y[run], accurate_sum(x[(slice(None),) * c + (run,)], axes)),
                          channels)
    return [at_dtype(node, 0, y)]


def _eigen_softmax(dtype: np.dtype) -> bool:
    name = str(dtype)
    return (name == "float64" or not onednn.onednn_enabled()
            or (name in ("float16", "bfloat16") and not onednn.onednn_runs(name)))


def _softmax(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """e = exp(x - max), y = e * (1 / sum(e)). float64 follows TF's Eigen kernel (softmax_op_functor.h): a row
    holding NaN or inf is all NaN; so do float16 and bfloat16 on a CPU where TF's oneDNN does not take them, and
    every dtype with TF_ENABLE_ONEDNN_OPTS=0 (graph_ir/executors/onednn.py). The others follow TF's x86 CPU build,
    which runs them through oneDNN's softmax: the max skips NaN, and exp of a NaN (x - max where x is NaN, or
    inf - inf) counts as +inf, so such a row gives NaN at those entries and 0 elsewhere (TF: softmax([inf, 1, 2]) =
    [nan, 0, 0])."""
    x = wide(args[0])
    axes = tuple(a % x.ndim for a in node.attrs["axes"])
    if x.size == 0:  # nothing to normalize (a max over an empty axis would have no identity)
        return [at_dtype(node, 0, x)]
    with np.errstate(all="ignore"):
        if _eigen_softmax(args[0].dtype):
            shifted = x - np.max(x, axis=axes, keepdims=True)
            e = np.exp(shifted)
        else:
            shifted = x - np.fmax.reduce(x, axis=axes, keepdims=True)
            e = np.where(np.isnan(shifted), np.inf, np.exp(shifted))
        y = e * (1 / accurate_sum(e, axes, keepdims=True).astype(e.dtype))
    return [at_dtype(node, 0, y)]


def _sparse_softmax_xent(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    features, labels = wide(args[0]), args[1]
    classes = features.shape[1]
    bad = (labels < 0) | (labels >= classes)
    if bad.any():  # TF's CPU kernel refuses them too
        raise GraphError(f"{node.type} {node.name!r}: label {int(labels[np.argmax(bad)])} is outside the valid "
                         f"range [0, {classes})")
    rows = np.arange(labels.size)
    if features.size == 0:  # no rows (the prototype refuses zero classes, as TF)
        return [at_dtype(node, 0, np.zeros(labels.shape)), at_dtype(node, 1, features)]
    with np.errstate(all="ignore"):
        shifted = features - np.max(features, axis=1, keepdims=True)
        e = np.exp(shifted)
        total = accurate_sum(e, 1, keepdims=True)  # float64 for float32 features, so is the log
        loss = np.log(total[:, 0]) - shifted[rows, labels]
        backprop = e / total.astype(e.dtype)
        backprop[rows, labels] -= 1
    return [at_dtype(node, 0, loss), at_dtype(node, 1, backprop)]


EXECUTORS = {
    "MatMulV2": _matmul,
    "BatchMatMulV2": _matmul,
    "Einsum": _einsum,
    "BiasAdd": _bias_add,
    "BiasAddGrad": _bias_add_grad,
    "SoftmaxV2": _softmax,
    "SparseSoftmaxCrossEntropyWithLogits": _sparse_softmax_xent,
}
