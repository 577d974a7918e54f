"""The activation family's TF -> GE mappings (prototypes: graph_ir/opset/activation.py), as Ascend's TF adapter maps
them (CANN's framework/tf_plugin AutoMapping): each TF op onto the GE op of the same name, inputs by position, except
LeakyRelu and LeakyReluGrad (TF's alpha is GE's negative_slope), LogSoftmax (onto LogSoftmaxV2 over the last axis),
TF's Inv and InvGrad (older names of Reciprocal and ReciprocalGrad, onto those).

Also `in_float32` and `bfloat16_in_float32`, for ops whose REG_OP declares no bfloat16: a bfloat16 input is cast to
float32, the op runs there and its result is cast back. For Relu, MaxPool and MaxPoolGrad that is bitwise the
bfloat16 result TF computes (a max, a selection or a routing of bfloat16 values is itself a bfloat16 value); for the
Conv2D gradients it is float32 sums rounded once, as TF's bfloat16 kernels accumulate."""

from __future__ import annotations

from collections.abc import Callable

from graph_ir.ir.nodes import Handle, Node
from graph_ir.lowering.ops.common import maps_to, same


def _output(result: Node | list[Handle]) -> Handle:
    """The first output of what ctx.add returned (a node, or the Consts it was folded into)."""
    return result.output(0) if isinstance(result, Node) else result[0]


def bfloat16_in_float32(lower: Callable) -> Callable:
    """`lower` (a lowering) run on float32 when its inputs are bfloat16: each bfloat16 input is cast to float32
    and the result cast back to bfloat16. Exact for ops whose float32 result of bfloat16 inputs is a bfloat16 value
    (max, selection, routing); for sums (a convolution's gradients) it is float32 accumulation rounded once."""

    @maps_to(lower.ge_type)
    def wrapped(ctx, node, inputs):
        if not any(h is not None and h.dtype.name == "bfloat16" for h in inputs):
            return lower(ctx, node, inputs)
        wide = [_output(ctx.add("Cast", [h], {"dst_type": "float32"}, suffix=f"float32_{k}"))
                if h is not None and h.dtype.name == "bfloat16" else h for k, h in enumerate(inputs)]
        return ctx.add("Cast", [_output(lower(ctx, node, wide))], {"dst_type": "bfloat16"}, suffix="bfloat16")

    return wrapped


def in_float32(ge_type: str, **attrs: Callable | str) -> Callable:
    """The lowering onto GE op `ge_type` (as `same`), run in float32 between two Casts when its inputs are bfloat16:
    for ops whose REG_OP declares no bfloat16 and whose result is exact in float32."""
    return bfloat16_in_float32(same(ge_type, **attrs))


_SAME_NAME = ("Relu6", "Relu6Grad", "Elu", "EluGrad", "Selu", "SeluGrad", "Softplus", "SoftplusGrad", "Softsign",
              "SoftsignGrad", "Log1p", "Expm1", "Reciprocal", "ReciprocalGrad", "SoftmaxCrossEntropyWithLogits")

LOWERINGS = {
    **{t: same(t) for t in _SAME_NAME},
    "LeakyRelu": same("LeakyRelu", negative_slope="alpha"),
    "LeakyReluGrad": same("LeakyReluGrad", negative_slope="alpha"),
    "LogSoftmax": same("LogSoftmaxV2", axes=lambda node: [-1]),
    "Inv": same("Reciprocal"),
    "InvGrad": same("ReciprocalGrad"),
}
