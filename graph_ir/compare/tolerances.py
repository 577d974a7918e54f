"""Each TF op's tolerance, as docs/lowering.md's lowering table states it (tests/graph_ir/test_compare_steps.py checks
the two agree): max |GE - TF| / max |TF| of the op's output on the same inputs. Every op the table does not list
with a tolerance of its own is bitwise: the rest of the table, the plumbing (ReadVariableOp and Identity become GE
Identity) and the optimizer ops, whose kernels are TF's own."""

from __future__ import annotations

from typing import Any

import numpy as np

ROUNDING = 2e-6  # Eigen's approximations of exp, tanh, erf..., pooling sums in another order
PRODUCT = 1e-5  # matrix products, convolutions and float sums: BLAS's summation order against Eigen's
ROUNDING_OPS = frozenset({
    "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atan2", "Atanh", "AvgPool", "AvgPoolGrad", "CTCLoss", "Cos", "Cosh", "Elu",
    "Erf", "Erfc", "Exp", "Expm1", "FFT", "FFT2D", "IFFT", "IFFT2D", "IRFFT", "Inv", "RFFT", "Log", "Log1p", "LogSoftmax", "MaxPoolGrad", "Pow", "Reciprocal", "Rsqrt",
    "Selu", "Sigmoid", "SigmoidGrad", "Sin", "Sinh", "Softmax", "SoftmaxCrossEntropyWithLogits", "Softplus",
    "SoftplusGrad", "SparseSoftmaxCrossEntropyWithLogits", "SqrtGrad", "StatelessRandomNormalV2",
    "StatelessTruncatedNormalV2", "RandomStandardNormal", "TruncatedNormal", "Tan", "Tanh"})
PRODUCT_OPS = frozenset({
    "BatchMatMulV2", "BatchMatMulV3", "BiasAddGrad", "Cholesky", "CollectiveReduceV2", "Conv2D", "Conv2DBackpropFilter",
    "Conv2DBackpropInput", "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropFilter",
    "DepthwiseConv2dNativeBackpropInput", "Einsum", "FusedBatchNormGradV3", "FusedBatchNormV3", "L2Loss",
    "LogMatrixDeterminant", "MatMul", "MatrixDeterminant", "MatrixInverse", "MatrixTriangularSolve", "Mean", "Prod",
    "Sum"})
# Sums of products, linear in each input: their rounding is relative to the sum of the terms' magnitudes (the op on
# |inputs|), not to the result's, which cancellation can make as small as rounding noise (the gradient of a bias
# before a BatchNormalization is zero in exact arithmetic).
SUMS_OF_PRODUCTS = frozenset({
    "BatchMatMulV2", "BatchMatMulV3", "BiasAddGrad", "Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput",
    "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropFilter", "DepthwiseConv2dNativeBackpropInput", "Einsum",
    "L2Loss", "MatMul", "Mean", "Sum"})
# How much an op multiplies its inputs' relative error, to first order, where more than once: a square doubles it.
GAIN = {"Square": 2.0, "SquaredDifference": 2.0}
# A variable after one whole step (docs/lowering.md: every weight, slot and counter within 1e-5 of its own scale in
# float32; 2e-2 with mixed_bfloat16).
STEP_FLOAT32 = 1e-5
STEP_HALF = 2e-2


def op_tolerance(tf_op: str, dtype: np.dtype | None = None) -> float:
    """The tolerance of TF op type `tf_op` (0.0: bitwise) with an output of `dtype`: the table's are float32's; in
    float16 or bfloat16 an op that is not bitwise may round its result to the other neighbour, one rounding of that
    dtype."""
    tolerance = PRODUCT if tf_op in PRODUCT_OPS else ROUNDING if tf_op in ROUNDING_OPS else 0.0
    if tolerance and dtype is not None and np.dtype(dtype).itemsize == 2 and np.dtype(dtype).kind in "fV":
        return max(tolerance, float(np.finfo(dtype).eps))
    return tolerance


def _ge_tolerances() -> dict[str, float]:
    """GE op type -> the largest tolerance among the TF ops lowered to it."""
    from graph_ir.lowering.ops import LOWERINGS  # the lowering table (imports TensorFlow)

    out: dict[str, float] = {}
    for tf_op, lowering in LOWERINGS.items():
        ge_type = getattr(lowering, "ge_type", None)
        if ge_type is not None:
            out[ge_type] = max(out.get(ge_type, 0.0), op_tolerance(tf_op))
    return out


def node_tolerance(node: Any, tf_op: str, dtype: np.dtype) -> float:
    """The tolerance of GE node `node`, which stands for a TF op `tf_op` with an output of `dtype`. A functional node
    (If, Case, While) gets the largest tolerance of the ops in its subgraphs, at any depth: its outputs are theirs."""
    own = op_tolerance(tf_op, dtype)
    if not node.subgraph_graphs:
        return own
    ge = _ge_tolerances()
    pending, body = list(node.subgraph_graphs), own
    while pending:
        graph = pending.pop()
        for inner in graph.nodes.values():
            body = max(body, ge.get(inner.type, 0.0))
            pending.extend(inner.subgraph_graphs)
    return body


def variable_tolerance(dtype: np.dtype, half_step: bool = False) -> float:
    """The tolerance of a variable the step writes, by its dtype, or STEP_HALF for any variable of a step that
    computes in float16 or bfloat16 (`half_step`: mixed precision keeps float32 variables)."""
    half = np.dtype(dtype).itemsize == 2 and np.dtype(dtype).kind in "fV"
    return STEP_HALF if half or half_step else STEP_FLOAT32
