"""The conv family's TF -> GE mappings (prototypes: graph_ir/opset/conv.py), as Ascend's TF adapter maps them: Conv2D
and its gradients onto the GE ops of the same names, TF's padding ("SAME", "VALID", "EXPLICIT") turned into GE's pads
[top, bottom, left, right] from the static shapes as TF computes them; the pools onto the GE pools, attributes kept."""

from __future__ import annotations

from graph_ir.errors import LoweringError
from graph_ir.lowering.ops.activation import bfloat16_in_float32, in_float32
from graph_ir.lowering.ops.common import maps_to, same, tf_attr
from graph_ir.opset.conv import same_padding


def _pads(node, size: tuple[int, int], kernel: tuple[int, int]) -> list[int]:
    """GE's pads for TF's padding over input height and width `size` with a `kernel` window."""
    padding, strides = tf_attr(node, "padding"), tf_attr(node, "strides")
    dilations = tf_attr(node, "dilations") or [1, 1, 1, 1]
    if tf_attr(node, "data_format") != "NHWC":
        raise LoweringError(f"cannot lower TF {node.op} {node.name!r}: data_format {tf_attr(node, 'data_format')!r}; "
                            "graph_ir lowers NHWC convolutions (TF's CPU layout)")
    if padding == "EXPLICIT":
        explicit = tf_attr(node, "explicit_paddings")
        return [explicit[2], explicit[3], explicit[4], explicit[5]]
    if padding == "VALID":
        return [0, 0, 0, 0]
    pads = []
    for n, k, s, d in zip(size, kernel, strides[1:3], dilations[1:3]):
        pads += same_padding(n, k, s, d)[1:]
    return pads


def _conv_attrs(node, size, kernel) -> dict:
    return {"strides": tf_attr(node, "strides"), "pads": _pads(node, size, kernel),
            "dilations": tf_attr(node, "dilations") or [1, 1, 1, 1], "data_format": "NHWC"}


def _static(ctx, node, handle, what: str) -> list[int]:
    value = ctx.value(handle)
    if value is None:
        raise LoweringError(f"cannot lower TF {node.op} {node.name!r}: its {what} is computed in the step, not static")
    return [int(v) for v in value.reshape(-1)]


@maps_to("Conv2D")
def _conv2d(ctx, node, inputs):
    x, f = inputs
    return ctx.add("Conv2D", [x, f], _conv_attrs(node, x.shape[1:3], f.shape[:2]))


@maps_to("Conv2DBackpropFilter")
def _conv2d_backprop_filter(ctx, node, inputs):
    x, sizes, dy = inputs
    kernel = _static(ctx, node, sizes, "filter_sizes")[:2]
    return ctx.add("Conv2DBackpropFilter", [x, sizes, dy], _conv_attrs(node, x.shape[1:3], kernel))


@maps_to("Conv2DBackpropInput")
def _conv2d_backprop_input(ctx, node, inputs):
    sizes, f, dy = inputs
    size = _static(ctx, node, sizes, "input_sizes")[1:3]
    return ctx.add("Conv2DBackpropInput", [sizes, f, dy], _conv_attrs(node, size, f.shape[:2]))


_POOL = {"ksize": "ksize", "strides": "strides", "padding": "padding", "data_format": "data_format"}

LOWERINGS = {
    "Conv2D": _conv2d,
    # their REG_OPs declare no bfloat16: float32 sums rounded once to bfloat16, as TF's bfloat16 kernels accumulate
    "Conv2DBackpropFilter": bfloat16_in_float32(_conv2d_backprop_filter),
    "Conv2DBackpropInput": bfloat16_in_float32(_conv2d_backprop_input),
    **{t: same(t, **_POOL) for t in ("AvgPool", "AvgPoolGrad")},
    # GE's max pools declare no bfloat16; a max and the routing of gradients to it are exact in float32
    **{t: in_float32(t, **_POOL) for t in ("MaxPool", "MaxPoolGrad")},
}
