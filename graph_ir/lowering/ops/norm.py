"""The normalization family's TF -> GE mappings (prototypes: graph_ir/opset/norm.py), as Ascend's TF adapter maps
them: FusedBatchNormV3 onto BatchNorm, FusedBatchNormGradV3 onto BatchNormGrad. GE's BatchNorm has no running
average: a training FusedBatchNormV3 with exponential_avg_factor other than 1 (Keras 2's fused layer) is refused."""

from __future__ import annotations

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.ops.common import maps_to, tf_attr

_ATTRS = ("epsilon", "data_format", "is_training")


def _attrs(node) -> dict:
    return {a: tf_attr(node, a) for a in _ATTRS}


@maps_to("BatchNorm")
def _batch_norm(ctx, node, inputs):
    attrs = _attrs(node)
    if attrs["is_training"] and tf_attr(node, "exponential_avg_factor", 1.0) != 1.0:
        raise LoweringError(f"cannot lower TF {node.op} {node.name!r}: exponential_avg_factor "
                            f"{tf_attr(node, 'exponential_avg_factor'):.6g} (a running average inside the op) has no GE "
                            "BatchNorm counterpart; update the moving statistics outside the op (as Keras 3 does)")
    if attrs["is_training"]:  # TF ignores mean and variance then (they may be empty)
        inputs = inputs[:3]
    return ctx.add("BatchNorm", inputs, attrs)


@maps_to("BatchNormGrad")
def _batch_norm_grad(ctx, node, inputs):
    return ctx.add("BatchNormGrad", inputs, _attrs(node))


LOWERINGS = {"FusedBatchNormV3": _batch_norm, "FusedBatchNormGradV3": _batch_norm_grad}
