"""The normalization family's GE prototypes (CANN ops-nn REG_OPs, declared in third_party/cann/ge_reg_ops.txt): BatchNorm and
BatchNormGrad, which Ascend's TF adapter maps TF's FusedBatchNormV3 and FusedBatchNormGradV3 onto. Executors:
graph_ir/executors/norm.py; TF mappings: graph_ir/lowering/ops/norm.py."""

from __future__ import annotations

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import IrAttr, IrInput, IrOp, IrOutput, register

_X = ("float16", "float32")
_F = ("float32",)
_ATTRS = (IrAttr("epsilon", "float", 0.0001), IrAttr("data_format", "string", "NHWC"),
          IrAttr("is_training", "bool", True))


def channel_axis(op: IrOp, node: str, attrs, rank: int) -> int:
    """The channel axis of data_format (NHWC: 3, NCHW: 1); BatchNorm takes 4-D tensors."""
    if rank != 4 or attrs["data_format"] not in ("NHWC", "NCHW"):
        raise GraphError(f"{op.type} {node!r}: x must be 4-D NHWC or NCHW, got rank {rank} and data_format "
                         f"{attrs['data_format']!r}")
    return 3 if attrs["data_format"] == "NHWC" else 1


def _check_vectors(op: IrOp, node: str, inputs, names, depth: int, allow_empty: tuple[str, ...] = ()) -> None:
    for h, name in zip(inputs, names):
        if h is not None and h.shape != (depth,) and not (name in allow_empty and h.shape == (0,)):
            raise GraphError(f"{op.type} {node!r}: {name} must have shape [{depth}] (x's channels), got "
                             f"{list(h.shape)}")


def _batch_norm(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    depth = x.shape[channel_axis(op, node, attrs, len(x.shape))]
    names = ("scale", "offset", "mean", "variance")
    _check_vectors(op, node, inputs[1:], names, depth, allow_empty=("mean", "variance") if attrs["is_training"]
                   else ())
    if not attrs["is_training"] and (len(inputs) < 5 or inputs[3] is None or inputs[4] is None):
        raise GraphError(f"BatchNorm {node!r}: inference (is_training false) needs mean and variance")
    vector = TensorDesc("v", inputs[1].dtype, (depth,))
    return [x.desc.renamed("y"), *(vector.renamed(n) for n in ("batch_mean", "batch_variance", "reserve_space_1",
                                                               "reserve_space_2")),
            TensorDesc("reserve_space_3", inputs[1].dtype, (0,))]


def _batch_norm_grad(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    dy, x = inputs[0], inputs[1]
    if dy.shape != x.shape or dy.dtype != x.dtype:
        raise GraphError(f"BatchNormGrad {node!r}: y_backprop {dy.dtype}{list(dy.shape)} must match x "
                         f"{x.dtype}{list(x.shape)}")
    depth = x.shape[channel_axis(op, node, attrs, len(x.shape))]
    _check_vectors(op, node, inputs[2:5], ("scale", "reserve_space_1", "reserve_space_2"), depth)
    vector = TensorDesc("v", inputs[2].dtype, (depth,))
    return [x.desc.renamed("x_backprop"), vector.renamed("scale_backprop"), vector.renamed("offset_backprop"),
            TensorDesc("reserve_space_4", inputs[2].dtype, ()), TensorDesc("reserve_space_5", inputs[2].dtype, ())]


register(IrOp("BatchNorm", (IrInput("x", _X), IrInput("scale", _F), IrInput("offset", _F),
                            IrInput("mean", _F, optional=True), IrInput("variance", _F, optional=True)),
              (IrOutput("y", _X), *(IrOutput(n, _F) for n in ("batch_mean", "batch_variance", "reserve_space_1",
                                                              "reserve_space_2", "reserve_space_3"))),
              _ATTRS, outputs_from="infer", infer=_batch_norm,
              doc="y = (x - mean) / sqrt(variance + epsilon) * scale + offset per channel; in training the batch's "
                  "mean and variance (batch_variance Bessel-corrected, reserve_space_2 not)."))
register(IrOp("BatchNormGrad", (IrInput("y_backprop", _X), IrInput("x", _X), IrInput("scale", _F),
                                IrInput("reserve_space_1", _F), IrInput("reserve_space_2", _F),
                                IrInput("reserve_space_3", _F, optional=True)),
              (IrOutput("x_backprop", _X), *(IrOutput(n, _F) for n in ("scale_backprop", "offset_backprop",
                                                                       "reserve_space_4", "reserve_space_5"))),
              _ATTRS, outputs_from="infer", infer=_batch_norm_grad,
              doc="The gradients of BatchNorm with respect to x, scale and offset, from the saved mean and variance."))
