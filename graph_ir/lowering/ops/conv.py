"""The conv family's TF -> GE mappings (prototypes: graph_ir/opset/conv.py), as Ascend's TF adapter maps them: Conv2D
and its gradients onto the GE ops of the same names, TF's padding ("SAME", "VALID", "EXPLICIT") turned into GE's pads
[top, bottom, left, right] from the static shapes as TF computes them; the pools onto the GE pools, attributes kept.
A grouped convolution (the filter takes C/g of x's C channels: Keras Conv2D(groups=g)) sets GE's `groups` = g. A
bfloat16 or float16 Conv2D read only by a BiasAdd lowers with it as one GE Conv2D with its bias input, as TF (oneDNN)
fuses them and rounds once, where TF's oneDNN takes that dtype on this CPU (graph_ir/executors/onednn.py)."""

from __future__ import annotations

from graph_ir.executors.onednn import onednn_runs
from graph_ir.ir.errors import LoweringError
from graph_ir.lowering.ops.activation import _output, bfloat16_in_float32, in_float32
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


def conv_groups(node, x_channels: int, filter_in_channels: int, out_channels: int) -> int:
    """GE Conv2D's `groups` for TF's Conv2D (or a gradient) whose filter takes filter_in_channels of x's x_channels
    (a grouped convolution, Keras Conv2D(groups=g)): x_channels / filter_in_channels, refused unless it divides both
    x's and the output's channels (what TF's grouped kernels require)."""
    groups, rest = divmod(x_channels, filter_in_channels) if filter_in_channels > 0 else (0, 1)
    if rest or groups < 1 or out_channels % groups:
        raise LoweringError(f"cannot lower TF {node.op} {node.name!r}: x has {x_channels} channels and the filter "
                            f"{filter_in_channels} inputs and {out_channels} outputs; a grouped convolution needs the "
                            "filter's inputs to divide x's channels into groups that divide the outputs")
    return groups


def _conv_attrs(node, size, kernel, channels: tuple[int, int, int] | None = None) -> dict:
    """GE's attrs; with channels (x's, the filter's inputs, its outputs) also `groups` when the convolution is
    grouped (TF's Conv2D with a filter of fewer inputs than x's channels, Keras Conv2D(groups=g))."""
    attrs = {"strides": tf_attr(node, "strides"), "pads": _pads(node, size, kernel),
             "dilations": tf_attr(node, "dilations") or [1, 1, 1, 1], "data_format": "NHWC"}
    if tf_attr(node, "padding") == "SAME":  # kept as the TF adapter keeps it: pads follow the image size
        attrs["padding"] = "SAME"
    if channels is not None:
        groups = conv_groups(node, *channels)
        if groups > 1:
            attrs["groups"] = groups
    return attrs


def _static(ctx, node, handle, what: str) -> list[int]:
    value = ctx.value(handle)
    if value is None:
        raise LoweringError(f"cannot lower TF {node.op} {node.name!r}: its {what} is computed in the step, not static")
    return [int(v) for v in value.reshape(-1)]


# The conv dtypes whose Conv2D + BiasAdd pair lowers as one GE Conv2D with its bias input, as TF's grappler remapper
# fuses them with oneDNN (tensorflow/core/grappler/optimizers/remapper.cc, _MklNativeFusedConv2D): the sum and the
# bias added in float32 and rounded once (graph_ir/executors/conv.py), where a Conv2D then a BiasAdd round twice.
# float32 is not fused: measured on test_mixed_bfloat16_cnn_step's model in float32 (tests/graph_ir/
# test_lowering_cnn.py), fusing changed no value of its K steps. float16 is fused as bfloat16 is: measured, TF's
# tf.function Conv2D + BiasAdd (and MatMul + BiasAdd, graph_ir/lowering/ops/nn.py) in float16 rounds once, with or
# without a Relu after, where eager (and TF without oneDNN) rounds twice (tests/graph_ir/test_lowering_cnn.py).
FUSED_BIAS_DTYPES = ("bfloat16", "float16")


def bias_add_to_fuse(ctx, node, dtypes: tuple[str, ...] = FUSED_BIAS_DTYPES):
    """The BiasAdd (NHWC) that alone reads TF `node` (a Conv2D or MatMul of dtype T in `dtypes`), to lower with it
    (as TF with oneDNN runs them), or None. Without oneDNN (TF_ENABLE_ONEDNN_OPTS=0), or for a dtype oneDNN does not
    take on this CPU (graph_ir/executors/onednn.py, which the executors ask too), TF's bfloat16 and float16 Conv2D
    (and MatMul) and BiasAdd run apart, each rounding."""
    reader = ctx.sole_reader(node.name)
    dtype = tf_attr(node, "T").name
    if (dtype not in dtypes or not onednn_runs(dtype) or reader is None
            or reader.op != "BiasAdd"
            or tf_attr(reader, "data_format") not in (None, "NHWC")
            or reader.input[0] not in (node.name, f"{node.name}:0") or any(t.startswith("^") for t in reader.input)):
        return None
    return reader


@maps_to("Conv2D")
def _conv2d(ctx, node, inputs):
    x, f = inputs
    attrs = _conv_attrs(node, x.shape[1:3], f.shape[:2], (x.shape[3], *f.shape[2:]))
    bias_add = None if "groups" in attrs else bias_add_to_fuse(ctx, node)
    if bias_add is None:
        return ctx.add("Conv2D", [x, f], attrs)
    # GE Conv2D's bias is float16 or float32 (its REG_OP): the bfloat16 (or float16) bias, exactly, in float32
    bias = ctx.handle_now(bias_add.input[1])
    if bias.dtype.name != "float32":
        bias = _output(ctx.add("Cast", [bias], {"dst_type": "float32"}, suffix="bias"))
    fused = ctx.add("Conv2D", [x, f, bias], attrs)
    ctx.lowered[bias_add.name] = fused  # the BiasAdd's result: the walk will not lower it again
    return fused


@maps_to("Conv2DBackpropFilter")
def _conv2d_backprop_filter(ctx, node, inputs):
    x, sizes, dy = inputs
    f_shape = _static(ctx, node, sizes, "filter_sizes")
    if len(f_shape) != 4:
        raise LoweringError(f"cannot lower TF {node.op} {node.name!r}: filter_sizes {f_shape}; expected 4 sizes")
    if tf_attr(node, "padding") == "EXPLICIT" and max(tf_attr(node, "dilations") or [1]) > 1:
        raise LoweringError(f"cannot lower TF {node.op} {node.name!r}: EXPLICIT padding with dilations "
                            f"{list(tf_attr(node, 'dilations'))}, which TF's CPU kernel refuses (conv_grad_filter_ops.cc: "
                            "no dilation rates larger than 1 there)")
    return ctx.add("Conv2DBackpropFilter", [x, sizes, dy],
                   _conv_attrs(node, x.shape[1:3], f_shape[:2], (x.shape[3], *f_shape[2:])))


@maps_to("Conv2DBackpropInput")
def _conv2d_backprop_input(ctx, node, inputs):
    sizes, f, dy = inputs
    x_shape = _static(ctx, node, sizes, "input_sizes")
    if len(x_shape) != 4:
        raise LoweringError(f"cannot lower TF {node.op} {node.name!r}: input_sizes {x_shape}; expected 4 sizes")
    return ctx.add("Conv2DBackpropInput", [sizes, f, dy],
                   _conv_attrs(node, x_shape[1:3], f.shape[:2], (x_shape[3], *f.shape[2:])))


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
