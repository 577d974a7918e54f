"""The nn family's TF -> GE mappings (prototypes: graph_ir/opset/nn.py), as Ascend's TF adapter maps them: MatMul
onto MatMulV2 (transpose_a/b as transpose_x1/x2), BatchMatMulV2 (adj_x/y as adj_x1/x2), Softmax onto SoftmaxV2 over
the last axis, BiasAdd, BiasAddGrad, Einsum and the sparse softmax cross-entropy onto the GE ops of the same name."""

from __future__ import annotations

from graph_ir.lowering.ops.common import count, same

LOWERINGS = {
    "MatMul": same("MatMulV2", transpose_x1="transpose_a", transpose_x2="transpose_b"),
    "BatchMatMulV2": same("BatchMatMulV2", adj_x1="adj_x", adj_x2="adj_y"),
    "BatchMatMulV3": same("BatchMatMulV2", adj_x1="adj_x", adj_x2="adj_y"),
    "Einsum": same("Einsum", equation="equation", N=count),
    "BiasAdd": same("BiasAdd", data_format="data_format"),
    "BiasAddGrad": same("BiasAddGrad", data_format="data_format"),
    "Softmax": same("SoftmaxV2", axes=lambda node: [-1]),
    "SparseSoftmaxCrossEntropyWithLogits": same("SparseSoftmaxCrossEntropyWithLogits"),
}
