"""The depthwise family's GE prototypes: DepthwiseConv2D and its two gradients, NHWC, with TF's filter layout
[kh, kw, C, multiplier] (GE's HWCN, as Ascend's TF parser plugin depthwise_conv2d_forward_native_plugin.cpp marks it).

Declared as CANN's REG_OPs declare them (hicann/ops-nn conv/depthwise_conv2d_backprop_{input,filter}/op_graph/
*_proto.h; DepthwiseConv2D in the Ascend 910_95 revision of CANN's nn_calculation_ops.h): float16, float32 and
bfloat16 x and filter (the older torch-npu copy allows float16 only: tests/graph_ir/test_reg_ops.py's
DTYPE_EXCEPTIONS); the filter gradient is always float32, the input gradient has out_backprop's dtype.
Executors: graph_ir/executors/depthwise.py; TF mappings: graph_ir/lowering/ops/depthwise.py."""

from __future__ import annotations

from graph_ir.ir.dtypes import BY_NAME
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import check_shape, const_dims
from graph_ir.opset.conv import _nhwc, conv_geometry

FLOATS = ("float16", "float32", "bfloat16")
SIZES = ("int32", "int64")


def depthwise_geometry(op: IrOp, node: str, attrs, x_shape, f_shape) -> tuple[int, int, int]:
    """(output height, output width, output channels C * multiplier) of x [N, H, W, C] by filter [kh, kw, C, M];
    the window arithmetic is Conv2D's (graph_ir.opset.conv.conv_geometry)."""
    _nhwc(op, node, attrs, x_shape)
    if len(f_shape) != 4 or f_shape[2] != x_shape[3] or min(f_shape) < 1:
        raise GraphError(f"{op.type} {node!r}: the filter must be [kh, kw, C, multiplier] with C = the input's "
                         f"{x_shape[3]} channels, got {list(f_shape)}")
    ho, wo = conv_geometry(op, node, {**attrs, "groups": 1}, x_shape, f_shape)
    return ho, wo, f_shape[2] * f_shape[3]


def _depthwise_conv2d(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, f = inputs[0], inputs[1]
    if any(h is not None for h in inputs[2:]) or attrs["offset_x"] != 0:
        raise GraphError(f"DepthwiseConv2D {node!r}: graph_ir runs it without bias, offset_w and offset_x (what "
                         f"TF's DepthwiseConv2dNative lowers to), got offset_x {attrs['offset_x']} and "
                         f"{sum(h is not None for h in inputs[2:])} of the optional inputs")
    ho, wo, channels = depthwise_geometry(op, node, attrs, x.shape, f.shape)
    return [TensorDesc("y", x.dtype, (x.shape[0], ho, wo, channels))]


def _backprop_input(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    f, dy = inputs[1], inputs[2]
    x_shape = check_shape(node, "input_size", const_dims(op, node, inputs[0], "input_size"))
    if len(x_shape) != 4:
        raise GraphError(f"{op.type} {node!r}: input_size must hold 4 dims, got {list(x_shape)}")
    ho, wo, channels = depthwise_geometry(op, node, attrs, x_shape, f.shape)
    if dy.shape != (x_shape[0], ho, wo, channels):
        raise GraphError(f"{op.type} {node!r}: out_backprop {list(dy.shape)} does not fit input_size "
                         f"{list(x_shape)} and filter {list(f.shape)} (expected {[x_shape[0], ho, wo, channels]})")
    return [TensorDesc("input_grad", f.dtype, x_shape)]


def _backprop_filter(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, dy = inputs[0], inputs[2]
    f_shape = check_shape(node, "filter_size", const_dims(op, node, inputs[1], "filter_size"))
    ho, wo, channels = depthwise_geometry(op, node, attrs, x.shape, f_shape)
    if dy.shape != (x.shape[0], ho, wo, channels):
        raise GraphError(f"{op.type} {node!r}: out_backprop {list(dy.shape)} does not fit input {list(x.shape)} "
                         f"and filter_size {list(f_shape)} (expected {[x.shape[0], ho, wo, channels]})")
    return [TensorDesc("filter_grad", BY_NAME["float32"], f_shape)]


_ATTRS = (IrAttr("strides", "list_int", required=True), IrAttr("dilations", "list_int", [1, 1, 1, 1]),
          IrAttr("pads", "list_int", required=True), IrAttr("data_format", "string", "NHWC"),
          IrAttr("padding", "string", adapter=True))
register(IrOp("DepthwiseConv2D", (IrInput("x", FLOATS), IrInput("filter", FLOATS),
                                  IrInput("bias", ("float16", "float32"), optional=True),
                                  IrInput("offset_w", ("int8",), optional=True)), (IrOutput("y", FLOATS),),
              (*_ATTRS, IrAttr("offset_x", "int", 0)), outputs_from="infer", infer=_depthwise_conv2d,
              same_dtype=("x", "filter"),
              doc="y[n, h, w, c * M + m] = sum over (i, j) of x[n, h*sh + i*dh - top, w*sw + j*dw - left, c] * "
                  "filter[i, j, c, m]; padding contributes nothing."))
register(IrOp("DepthwiseConv2DBackpropInput", (IrInput("input_size", SIZES), IrInput("filter", FLOATS),
                                               IrInput("out_backprop", FLOATS)), (IrOutput("input_grad", FLOATS),),
              _ATTRS, outputs_from="infer", infer=_backprop_input, same_dtype=("filter", "out_backprop"),
              doc="input_grad = the gradient of DepthwiseConv2D with respect to x (of the Const shape input_size)."))
register(IrOp("DepthwiseConv2DBackpropFilter", (IrInput("input", FLOATS), IrInput("filter_size", SIZES),
                                                IrInput("out_backprop", FLOATS)), (IrOutput("filter_grad", ("float32",)),),
              _ATTRS, outputs_from="infer", infer=_backprop_filter, same_dtype=("input", "out_backprop"),
              doc="filter_grad (float32) = the gradient of DepthwiseConv2D with respect to its filter (of the Const "
                  "shape filter_size)."))
