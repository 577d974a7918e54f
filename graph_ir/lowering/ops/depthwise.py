"""The depthwise family's TF -> GE mappings (prototypes: graph_ir/opset/depthwise.py), as Ascend's TF parser plugins
map them (depthwise_conv2d_forward_native_plugin.cpp and the two backprop plugins): DepthwiseConv2dNative and its
gradients onto GE's DepthwiseConv2D, DepthwiseConv2DBackpropInput and DepthwiseConv2DBackpropFilter, inputs by
position, TF's filter [kh, kw, C, multiplier] kept as GE's HWCN filter, and TF's padding ("SAME", "VALID",
"EXPLICIT") turned into GE's pads from the static shapes as the conv family does. GE's filter gradient is float32: a
float16 or bfloat16 step casts it back to TF's dtype.

The two gradients are refused where TF's CPU kernels for them (tensorflow/core/kernels/depthwise_conv_grad_op.cc)
compute something else than GE's ops would (measured: tests/graph_ir/test_depthwise_limits.py): with dilations other
than 1 they compute the undilated gradient; with EXPLICIT padding the padding takes part as zeros, so an inf or NaN
meeting it gives NaN (0 * inf), where SAME's and VALID's and GE's pads contribute nothing."""

from __future__ import annotations

from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.ops.common import maps_to, tf_attr
from graph_ir.lowering.ops.conv import _conv_attrs, _static


@maps_to("DepthwiseConv2D")
def _depthwise_conv2d(ctx, node, inputs):
    x, f = inputs
    return ctx.add("DepthwiseConv2D", [x, f], _conv_attrs(node, x.shape[1:3], f.shape[:2]))


def _as_tf_computes_it(node) -> None:
    """Refuses the gradients whose TF CPU kernel computes something else than GE's op would."""
    dilations = tf_attr(node, "dilations") or [1, 1, 1, 1]
    if list(dilations) != [1, 1, 1, 1]:
        raise LoweringError(f"cannot lower TF {node.op} {node.name!r}: dilations {list(dilations)}; TF's CPU kernel "
                            "ignores them (it computes the undilated gradient) while GE's op applies them, so the step "
                            "would differ from TensorFlow's; graph_ir lowers this gradient with dilations [1, 1, 1, 1]")
    if tf_attr(node, "padding") == "EXPLICIT":
        raise LoweringError(f"cannot lower TF {node.op} {node.name!r}: padding 'EXPLICIT'; TF's CPU kernel multiplies "
                            "its padding as zeros (an inf or NaN meeting it gives NaN) while GE's pads contribute "
                            "nothing, so the step could differ from TensorFlow's; graph_ir lowers this gradient with "
                            "SAME or VALID padding")


@maps_to("DepthwiseConv2DBackpropInput")
def _backprop_input(ctx, node, inputs):
    sizes, f, dy = inputs
    _as_tf_computes_it(node)
    size = _static(ctx, node, sizes, "input_sizes")[1:3]
    return ctx.add("DepthwiseConv2DBackpropInput", [sizes, f, dy], _conv_attrs(node, size, f.shape[:2]))


@maps_to("DepthwiseConv2DBackpropFilter")
def _backprop_filter(ctx, node, inputs):
    x, sizes, dy = inputs
    _as_tf_computes_it(node)
    kernel = _static(ctx, node, sizes, "filter_sizes")[:2]
    grad = ctx.add("DepthwiseConv2DBackpropFilter", [x, sizes, dy], _conv_attrs(node, x.shape[1:3], kernel))
    dtype = tf_attr(node, "T")
    if dtype.name == "float32":
        return grad
    return ctx.add("Cast", [grad[0] if isinstance(grad, list) else grad.output(0)], {"dst_type": dtype},
                   suffix="cast")


LOWERINGS = {
    "DepthwiseConv2dNative": _depthwise_conv2d,
    "DepthwiseConv2dNativeBackpropInput": _backprop_input,
    "DepthwiseConv2dNativeBackpropFilter": _backprop_filter,
}
