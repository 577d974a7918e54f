"""The nn family's TF -> GE mappings (prototypes: graph_ir/opset/nn.py), as Ascend's TF adapter maps them: MatMul
onto MatMulV2 (transpose_a/b as transpose_x1/x2), BatchMatMulV2 (adj_x/y as adj_x1/x2), Softmax onto SoftmaxV2 over
the last axis, BiasAdd, BiasAddGrad, Einsum (an ellipsis made explicit: _einsum) and the sparse softmax cross-entropy onto the GE ops of the same name.
A float16 MatMul read only by a BiasAdd lowers with it as one MatMulV2 with its bias input, as TF (oneDNN) fuses
them and rounds once (where TF's oneDNN takes float16 on this CPU). A bfloat16 Einsum (GE's Einsum declares f16, f32,
i32) runs in float32 between Casts: float32 sums of bfloat16 products rounded to bfloat16, as TF's bfloat16
contraction accumulates in float32 and rounds once."""

from __future__ import annotations

import string

import numpy as np

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.ops.activation import bfloat16_in_float32
from graph_ir.lowering.ops.common import first, maps_to, same, tf_attr
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


@maps_to("Einsum")
def _einsum(ctx, node, inputs):
    """An equation with an ellipsis ("...ij,...jk->...ik", "...,a->...a") becomes an explicit one for GE's Einsum:
    the ellipsis dims get letters the equation does not use, aligned from the right and broadcast as tf.einsum
    broadcasts them (TF's EinsumOp: NumPy's rule); a size-1 dim that broadcasts against a larger one is reshaped
    away from its input and its letter dropped from that term (the product reads the one element for every index,
    which is what broadcasting does). An output without the ellipsis while inputs have ellipsis dims is refused,
    as TF refuses it."""
    equation = tf_attr(node, "equation").replace(" ", "")
    attrs = {"equation": equation, "N": len(inputs)}
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    if "..." not in equation or not arrow or len(terms) != len(inputs):
        return ctx.add("Einsum", inputs, attrs)  # explicit, or refused by the prototype naming the node
    shapes = []
    for term, h in zip(terms, inputs):
        rank = len(h.shape) - len(term.replace("...", ""))
        if rank < 0 or ("..." not in term and rank != 0):
            raise LoweringError(f"TF Einsum {node.name!r}: term {term!r} does not fit input of shape {list(h.shape)}")
        shapes.append(tuple(h.shape[term.index("..."):term.index("...") + rank]) if "..." in term else ())
    try:
        batch = np.broadcast_shapes(*shapes)
    except ValueError:
        raise LoweringError(f"TF Einsum {node.name!r}: the ellipsis dims {[list(b) for b in shapes]} of {equation!r} "
                            "do not broadcast") from None
    if "..." not in out and batch:
        raise LoweringError(f"TF Einsum {node.name!r}: the output of {equation!r} has no ellipsis, but the inputs "
                            f"have ellipsis dims {list(batch)} (TF refuses it too)")
    letters = [c for c in string.ascii_letters if c not in equation][:len(batch)]
    new_terms, new_inputs = [], []
    for k, (term, h, own) in enumerate(zip(terms, inputs, shapes)):
        if "..." not in term:
            new_terms.append(term)
            new_inputs.append(h)
            continue
        mine = letters[len(batch) - len(own):]
        keep = [j for j, d in enumerate(own) if d == batch[len(batch) - len(own) + j]]
        new_terms.append(term.replace("...", "".join(mine[j] for j in keep)))
        if len(keep) < len(own):
            at = term.index("...")
            shape = [*h.shape[:at], *(own[j] for j in keep), *h.shape[at + len(own):]]
            h = first(ctx.add("Reshape", [h, ctx.const(np.asarray(shape, np.int64), f"shape_{k}")],
                              suffix=f"reshape_{k}"))
        new_inputs.append(h)
    attrs["equation"] = f"{','.join(new_terms)}->{out.replace('...', ''.join(letters))}"
    return ctx.add("Einsum", new_inputs, attrs)


LOWERINGS = {
    "MatMul": _matmul,
    "BatchMatMulV2": same("BatchMatMulV2", adj_x1="adj_x", adj_x2="adj_y"),
    "BatchMatMulV3": same("BatchMatMulV2", adj_x1="adj_x", adj_x2="adj_y"),
    "Einsum": bfloat16_in_float32(_einsum),
    "BiasAdd": same("BiasAdd", data_format="data_format"),
    "BiasAddGrad": same("BiasAddGrad", data_format="data_format"),
    "Softmax": same("SoftmaxV2", axes=lambda node: [-1]),
    "SparseSoftmaxCrossEntropyWithLogits": same("SparseSoftmaxCrossEntropyWithLogits"),
}
