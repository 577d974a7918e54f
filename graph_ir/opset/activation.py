"""The activation family's GE prototypes, as CANN's REG_OPs declare them (hicann/ops-nn activation/*/op_graph/*_proto.h,
hicann/ops-math math/*/op_graph/*_proto.h): the Keras activations and their gradients (Relu6, LeakyRelu, Elu, Selu,
Softplus, Softsign), the elementwise functions the built-in losses use (Log1p, Expm1, Reciprocal and its gradient),
LogSoftmaxV2 and the dense softmax cross-entropy. dtypes: CANN's lists, less the complex and quantized types graph_ir
does not hold. Executors: graph_ir/executors/activation.py; TF mappings: graph_ir/lowering/ops/activation.py."""

from __future__ import annotations

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import FLOATS, IrAttr, IrInput, IrOp, IrOutput, register

FLOATING = ("float16", "float32", "float64")  # CANN's FloatingDataType (no bfloat16)
# CANN's RealNumberType, as far as graph_ir holds it (uint32/uint64 have no executor arithmetic worth declaring).
REAL_NUMBERS = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16")

# Unary: type -> (dtypes, attrs). Each y has x's dtype and shape.
_UNARY = {
    "Relu6": (REAL_NUMBERS, ()),  # y = min(max(x, 0), 6)
    "LeakyRelu": (FLOATING, (IrAttr("negative_slope", "float", 0.0),)),  # y = x > 0 ? x : x * negative_slope
    # y = x >= 0 ? scale * x : scale * alpha * (exp(input_scale * x) - 1); TF's Elu is alpha = scale = input_scale = 1
    "Elu": (FLOATING, (IrAttr("alpha", "float", 1.0), IrAttr("scale", "float", 1.0),
                       IrAttr("input_scale", "float", 1.0))),
    "Selu": (FLOATING, ()),  # y = x < 0 ? scale * alpha * (exp(x) - 1) : scale * x
    "Softplus": (FLOATING, ()),  # y = log(exp(x) + 1)
    "Softsign": (FLOATING, ()),  # y = x / (|x| + 1)
    "Log1p": (FLOATS, ()),  # y = log(1 + x)
    "Expm1": (FLOATS, ()),  # y = exp(x) - 1
    "Reciprocal": (FLOATS, ()),  # y = 1 / x
}
# Gradients: type -> (inputs in IR order, output name, dtypes, attrs); inputs and output share one dtype and shape.
_GRADS = {
    "Relu6Grad": (("gradients", "features"), "backprops", REAL_NUMBERS, ()),
    "LeakyReluGrad": (("gradients", "features"), "backprops", FLOATING, (IrAttr("negative_slope", "float", 0.0),)),
    "EluGrad": (("grads", "activations"), "y", FLOATING, ()),
    "SeluGrad": (("gradients", "outputs"), "y", FLOATING, ()),
    "SoftplusGrad": (("gradients", "features"), "backprops", FLOATING, ()),
    "SoftsignGrad": (("gradients", "features"), "output", FLOATING, ()),
    "ReciprocalGrad": (("y", "dy"), "z", FLOATS, ()),
}

for _type, (_dtypes, _attrs) in _UNARY.items():
    register(IrOp(_type, (IrInput("x", _dtypes),), (IrOutput("y", _dtypes),), _attrs, outputs_from="same",
                  doc=f"y = {_type}(x)."))
for _type, (_ports, _out, _dtypes, _attrs) in _GRADS.items():
    register(IrOp(_type, tuple(IrInput(p, _dtypes) for p in _ports), (IrOutput(_out, _dtypes),), _attrs,
                  outputs_from="same", same_dtype=_ports, same_shape=_ports,
                  doc=f"{_out} = the gradient of {_type[:-4]}, from {' and '.join(_ports)}."))


def _log_softmax(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    rank = len(x.shape)
    if not attrs["axes"] or any(not -rank <= a < rank for a in attrs["axes"]):
        raise GraphError(f"LogSoftmaxV2 {node!r}: axes {attrs['axes']} out of range for shape {list(x.shape)}")
    return [TensorDesc("logsoftmax", x.dtype, x.shape)]


_LOG_SOFTMAX = ("float64", "float16", "bfloat16", "float32")
register(IrOp("LogSoftmaxV2", (IrInput("logits", _LOG_SOFTMAX),), (IrOutput("logsoftmax", _LOG_SOFTMAX),),
              (IrAttr("axes", "list_int", [-1]),), outputs_from="infer", infer=_log_softmax,
              doc="logsoftmax = (x - max) - log(sum(exp(x - max))) over `axes`."))


def _softmax_xent(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    """Features and labels broadcast to one [batch, classes] shape, as TF's kernel broadcasts them (xent_op.cc:
    BCast of the two shapes, then a rank-2 check)."""
    features, labels = inputs
    if len(features.shape) != 2 or len(labels.shape) != 2 or any(
            f != b and 1 not in (f, b) for f, b in zip(features.shape, labels.shape)):
        raise GraphError(f"SoftmaxCrossEntropyWithLogits {node!r}: features and labels must be [batch, classes] "
                         f"shapes that broadcast to one, got {list(features.shape)} and {list(labels.shape)}")
    shape = tuple(max(f, b) if 0 not in (f, b) else 0 for f, b in zip(features.shape, labels.shape))
    return [TensorDesc("loss", features.dtype, shape[:1]), TensorDesc("backprop", features.dtype, shape)]


_XENT = ("float64", "float16", "float32")
register(IrOp("SoftmaxCrossEntropyWithLogits", (IrInput("features", _XENT), IrInput("labels", _XENT)),
              (IrOutput("loss", _XENT), IrOutput("backprop", _XENT)), outputs_from="infer", infer=_softmax_xent,
              same_dtype=("features", "labels"),
              doc="loss = sum(labels * -log softmax(features)) per row; backprop = softmax(features) - labels."))
