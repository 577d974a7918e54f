"""The nn family's TF -> GE mappings (prototypes: graph_ir/opset/nn.py), as Ascend's TF adapter maps them: MatMul
onto MatMulV2 (transpose_a/b as transpose_x1/x2), BatchMatMulV2 (adj_x/y as adj_x1/x2), Softmax onto SoftmaxV2 over
the last axis, BiasAdd, BiasAddGrad, Einsum and the sparse softmax cross-entropy onto the GE ops of the same name.
A float16 MatMul read only by a BiasAdd lowers with it as one MatMulV2 with its bias input, as TF (oneDNN) fuses
them and rounds once. A bfloat16 Einsum (GE's Einsum declares f16, f32, i32) runs in float32 between Casts: float32
sums of bfloat16 products rounded to bfloat16, as TF's bfloat16 contraction accumulates in float32 and rounds once."""

from __future__ import annotations

from graph_ir.lowering.ops.activation import bfloat16_in_float32
from graph_ir.lowering.ops.common import count, maps_to, same, tf_attr
from graph_ir.lowering.ops.conv import bias_add_to_fuse

# The MatMul dtypes whose MatMul + BiasAdd pair TF's grappler remapper fuses with oneDNN (tensorflow/core/grappler/
# optimizers/remapper.cc, _MklFusedMatMul), adding the bias to the float32 sum before rounding once: measured for
# float16 (tests/graph_ir/test_lowering_cnn.py). bfloat16 MatMul stays apart: not measured yet.
FUSED_MATMUL_BIAS_DTYPES = ("float16",)


@maps_to("MatMulV2")
def _matmul(ctx, node, inputs):
    attrs = {"transpose_x1": tf_attr(node, "transpose_a"), "transpose_x2": tf_attr(node, "transpose_b")}
    bias_add = bias_add_to_fuse(ctx, node, FUSED_MATMUL_BIAS_DTYPES)
    if bias_add is None:
        return ctx.add("MatMulV2", inputs, attrs)
    # MatMulV2's bias has x1's dtype; its executor adds it to the float32 sum, then rounds once
    fused = ctx.add("MatMulV2", [*inputs, ctx.handle_now(bias_add.input[1])], attrs)
    ctx.lowered[bias_add.name] = fused  # the BiasAdd's result: the walk will not lower it again
    return fused


LOWERINGS = {
    "MatMul": _matmul,
    "BatchMatMulV2": same("BatchMatMulV2", adj_x1="adj_x", adj_x2="adj_y"),
    "BatchMatMulV3": same("BatchMatMulV2", adj_x1="adj_x", adj_x2="adj_y"),
    "Einsum": bfloat16_in_float32(same("Einsum", equation="equation", N=count)),
    "BiasAdd": same("BiasAdd", data_format="data_format"),
    "BiasAddGrad": same("BiasAddGrad", data_format="data_format"),
    "Softmax": same("SoftmaxV2", axes=lambda node: [-1]),
    "SparseSoftmaxCrossEntropyWithLogits": same("SparseSoftmaxCrossEntropyWithLogits"),
}
