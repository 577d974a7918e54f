"""The conv family's GE prototypes (CANN ops-nn REG_OPs, declared in third_party/cann/ge_reg_ops.txt): Conv2D and its
two gradients, MaxPool, MaxPoolGrad, AvgPool and AvgPoolGrad, in NHWC with HWIO filters (what TF's CPU kernels take).
Executors: graph_ir/executors/conv.py; TF mappings: graph_ir/lowering/ops/conv.py."""

from __future__ import annotations

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import check_shape, const_dims

CONV = ("float16", "float32", "bfloat16")
GRAD = ("float16", "float32", "float64")
POOL = ("float16", "float32", "float64")
INT32_MAX = 2**31 - 1  # TF's conv and pool kernels read strides, dilations and ksize as int32 attrs


def _nhwc(op: IrOp, node: str, attrs, shape, what: str = "x") -> None:
    if attrs["data_format"] != "NHWC" or len(shape) != 4:
        raise GraphError(f"{op.type} {node!r}: graph_ir runs NHWC 4-D tensors (TF's CPU layout), got data_format "
                         f"{attrs['data_format']!r} and {what} of shape {list(shape)}")


def _pair(op: IrOp, node: str, attrs, name: str) -> tuple[int, int]:
    values = attrs[name]
    if len(values) != 4 or values[0] != 1 or values[3] != 1 or min(values) < 1 or max(values) > INT32_MAX:
        raise GraphError(f"{op.type} {node!r}: {name} must be [1, h, w, 1] with 1 <= h, w <= 2^31-1 (TF reads them "
                         f"as int32), got {values}")
    return values[1], values[2]


def padding_pads(op: IrOp, node: str, attrs, x_shape, f_shape) -> list[int] | None:
    """The pads that the TF adapter's `padding` attribute gives for x [N, H, W, C] and filter [kh, kw, ...]: TF's
    SAME or VALID padding, recomputed at each input size as CANN's conv infer functions recompute them
    (ops/built-in/op_proto/nn_calculation_ops.cc); None without the attribute."""
    mode = attrs.get("padding")
    if mode is None:
        return None
    if mode not in ("SAME", "VALID"):
        raise GraphError(f"{op.type} {node!r}: attribute 'padding' is {mode!r}; expected 'SAME' or 'VALID'")
    if mode == "VALID":
        return [0, 0, 0, 0]
    (sh, sw), (dh, dw) = _pair(op, node, attrs, "strides"), _pair(op, node, attrs, "dilations")
    return [*same_padding(x_shape[1], f_shape[0], sh, dh)[1:], *same_padding(x_shape[2], f_shape[1], sw, dw)[1:]]


def with_padding_pads(op: IrOp, node: str, inputs, attrs: dict) -> dict:
    """`attrs` with `pads` recomputed from the `padding` attribute at the inputs' shapes (a template graph's
    convolution at a call's image size, graph_ir/dynamic); unchanged without it."""
    spec = next((a for a in op.attrs if a.name == "padding"), None)
    if spec is None or not spec.adapter or attrs.get("padding") is None:
        return attrs  # (the pools' own `padding` is TF's: their windows follow it at every size)
    names = [i.name for i in op.inputs]

    def dims(name: str) -> list[int]:
        h = inputs[names.index(name)]
        return list(h.shape) if name in ("x", "input", "filter") else const_dims(op, node, h, name)

    x = dims(next(n for n in ("x", "input", "input_size") if n in names))
    f = dims("filter" if "filter" in names else "filter_size")
    return {**attrs, "pads": padding_pads(op, node, attrs, x, f)}


def conv_geometry(op: IrOp, node: str, attrs, x_shape, f_shape) -> tuple[int, int]:
    """The output height and width of a convolution of x [N, H, W, C] by filter [kh, kw, C, O]."""
    (sh, sw), (dh, dw) = _pair(op, node, attrs, "strides"), _pair(op, node, attrs, "dilations")
    pads = attrs["pads"]
    if len(pads) != 4 or min(pads) < 0:
        raise GraphError(f"{op.type} {node!r}: pads must be [top, bottom, left, right] >= 0, got {pads}")
    want = padding_pads(op, node, attrs, x_shape, f_shape)
    if want is not None and list(pads) != want:
        raise GraphError(f"{op.type} {node!r}: pads {list(pads)} are not what padding {attrs['padding']!r} gives for "
                         f"x {list(x_shape)} and filter {list(f_shape)}: {want}")
    groups = attrs["groups"]
    if groups < 1 or x_shape[3] != f_shape[2] * groups or f_shape[3] % groups:
        # CANN's Conv2D REG_OP: groups splits x's channels (and the outputs) into g blocks, the filter [kh, kw, C/g, O]
        raise GraphError(f"{op.type} {node!r}: x has {x_shape[3]} channels and the filter {f_shape[2]} inputs and "
                         f"{f_shape[3]} outputs with groups {groups}; expected x's channels = filter inputs * groups "
                         f"and outputs divisible by groups")
    if min(f_shape[:2]) < 1:
        raise GraphError(f"{op.type} {node!r}: the filter's window is {f_shape[0]}x{f_shape[1]} taps; it needs at "
                         f"least one tap along each axis")
    out = []
    for size, k, s, d, before, after in ((x_shape[1], f_shape[0], sh, dh, pads[0], pads[1]),
                                         (x_shape[2], f_shape[1], sw, dw, pads[2], pads[3])):
        span = (k - 1) * d + 1
        if size + before + after < span:
            raise GraphError(f"{op.type} {node!r}: a window of {span} does not fit {size} + pads {before}, {after}")
        out.append((size + before + after - span) // s + 1)
    return out[0], out[1]


def _conv2d(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, f = inputs[0], inputs[1]
    _nhwc(op, node, attrs, x.shape)
    if len(f.shape) != 4 or 0 in f.shape:  # TF's Conv2D refuses an empty filter too (conv_ops.cc)
        raise GraphError(f"Conv2D {node!r}: filter must be [kh, kw, in, out] with no zero dim, got {list(f.shape)}")
    if max(attrs["pads"], default=0) >= INT32_MAX:  # TF's CPU Conv2D: FastBoundsCheck(pad, INT_MAX), conv_ops_impl.h
        raise GraphError(f"Conv2D {node!r}: pads must each be below 2^31-1, as TF's Conv2D kernel refuses larger "
                         f"explicit paddings, got {list(attrs['pads'])}")
    ho, wo = conv_geometry(op, node, attrs, x.shape, f.shape)
    bias, offset_w = inputs[2] if len(inputs) > 2 else None, inputs[3] if len(inputs) > 3 else None
    if bias is not None and bias.shape != (f.shape[3],):  # CANN's Conv2D: bias is 1-D [C_out]
        raise GraphError(f"Conv2D {node!r}: input 'bias' must have shape [{f.shape[3]}] (the filter's outputs), got "
                         f"{list(bias.shape)}")
    if bias is not None and attrs["groups"] != 1:
        raise GraphError(f"Conv2D {node!r}: input 'bias' with groups {attrs['groups']}; graph_ir adds Conv2D's bias "
                         f"with groups 1 only")
    if offset_w is not None:
        raise GraphError(f"Conv2D {node!r}: input 'offset_w' (an int8 quantization offset) is given, but graph_ir "
                         f"runs float convolutions only")
    return [TensorDesc("y", x.dtype, (x.shape[0], ho, wo, f.shape[3]))]


def _conv2d_backprop_filter(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, dy = inputs[0], inputs[2]
    f_shape = check_shape(node, "filter_size", const_dims(op, node, inputs[1], "filter_size"))
    _nhwc(op, node, attrs, x.shape)
    if len(f_shape) != 4 or dy.shape != (x.shape[0], *conv_geometry(op, node, attrs, x.shape, f_shape), f_shape[3]):
        raise GraphError(f"{op.type} {node!r}: out_backprop {list(dy.shape)} does not fit x {list(x.shape)} and "
                         f"filter_size {list(f_shape)}")
    return [TensorDesc("y", x.dtype, f_shape)]


def _conv2d_backprop_input(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    f, dy = inputs[1], inputs[2]
    x_shape = check_shape(node, "input_size", const_dims(op, node, inputs[0], "input_size"))
    _nhwc(op, node, attrs, x_shape, "input_size")
    if len(f.shape) != 4 or dy.shape != (x_shape[0], *conv_geometry(op, node, attrs, x_shape, f.shape), f.shape[3]):
        raise GraphError(f"{op.type} {node!r}: out_backprop {list(dy.shape)} does not fit input_size "
                         f"{list(x_shape)} and filter {list(f.shape)}")
    return [TensorDesc("y", f.dtype, x_shape)]


_CONV_ATTRS = (IrAttr("strides", "list_int", required=True), IrAttr("pads", "list_int", required=True),
               IrAttr("dilations", "list_int", [1, 1, 1, 1]), IrAttr("groups", "int", 1),
               IrAttr("data_format", "string", "NHWC"), IrAttr("padding", "string", adapter=True))
register(IrOp("Conv2D", (IrInput("x", CONV), IrInput("filter", CONV), IrInput("bias", ("float16", "float32"),
                                                                                optional=True),
                         IrInput("offset_w", ("int8",), optional=True)), (IrOutput("y", CONV),),
              (*_CONV_ATTRS, IrAttr("offset_x", "int", 0)), outputs_from="infer", infer=_conv2d,
              same_dtype=("x", "filter"),
              doc="y = the 2-D convolution (cross-correlation) of x by filter (HWIO), plus bias [Cout] if given."))
register(IrOp("Conv2DBackpropFilter", (IrInput("x", GRAD), IrInput("filter_size", ("int32",)),
                                       IrInput("out_backprop", GRAD)), (IrOutput("y", GRAD),), _CONV_ATTRS,
              outputs_from="infer", infer=_conv2d_backprop_filter, same_dtype=("x", "out_backprop"),
              doc="y = the gradient of Conv2D with respect to its filter (of the Const shape filter_size)."))
register(IrOp("Conv2DBackpropInput", (IrInput("input_size", ("int32",)), IrInput("filter", GRAD),
                                      IrInput("out_backprop", GRAD)), (IrOutput("y", GRAD),), _CONV_ATTRS,
              outputs_from="infer", infer=_conv2d_backprop_input, same_dtype=("filter", "out_backprop"),
              doc="y = the gradient of Conv2D with respect to its input (of the Const shape input_size)."))


def same_padding(size: int, k: int, s: int, d: int = 1) -> tuple[int, int, int]:
    """TF's SAME padding along one axis of `size`, for a window of k taps d apart moved by stride s: (output size,
    padding before, padding after); the odd element of the padding goes after."""
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    return out, total // 2, total - total // 2


def pool_geometry(op: IrOp, node: str, attrs, x_shape) -> tuple[int, int, list[int]]:
    """(output height, output width, pads [top, bottom, left, right]) of a pooling over x [N, H, W, C]."""
    _nhwc(op, node, attrs, x_shape)
    (kh, kw), (sh, sw) = _pair(op, node, attrs, "ksize"), _pair(op, node, attrs, "strides")
    if attrs["padding"] not in ("SAME", "VALID"):
        raise GraphError(f"{op.type} {node!r}: padding must be SAME or VALID, got {attrs['padding']!r}")
    out, pads = [], []
    for size, k, s in ((x_shape[1], kh, sh), (x_shape[2], kw, sw)):
        if attrs["padding"] == "VALID":
            if size < k:
                raise GraphError(f"{op.type} {node!r}: a window of {k} does not fit {size} (VALID)")
            out.append((size - k) // s + 1)
            pads += [0, 0]
        else:
            n, before, after = same_padding(size, k, s)
            out.append(n)
            pads += [before, after]
    return out[0], out[1], pads


def _pool(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    ho, wo, _ = pool_geometry(op, node, attrs, x.shape)
    return [TensorDesc("y", x.dtype, (x.shape[0], ho, wo, x.shape[3]))]


def _max_pool_grad(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, y, grad = inputs
    ho, wo, _ = pool_geometry(op, node, attrs, x.shape)
    if y.shape != grad.shape or y.shape != (x.shape[0], ho, wo, x.shape[3]):
        raise GraphError(f"MaxPoolGrad {node!r}: x2 {list(y.shape)} and grad {list(grad.shape)} must be the pooled "
                         f"shape of x1 {list(x.shape)}")
    return [TensorDesc("y", x.dtype, x.shape)]


def _avg_pool_grad(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    shape = check_shape(node, "orig_input_shape", const_dims(op, node, inputs[0], "orig_input_shape"))
    grad = inputs[1]
    ho, wo, _ = pool_geometry(op, node, attrs, shape)
    if grad.shape != (shape[0], ho, wo, shape[3]):
        raise GraphError(f"AvgPoolGrad {node!r}: input_grad {list(grad.shape)} is not the pooled shape of "
                         f"{list(shape)}")
    return [TensorDesc("out_grad", grad.dtype, shape)]


_POOL_ATTRS = (IrAttr("ksize", "list_int", required=True), IrAttr("strides", "list_int", required=True),
               IrAttr("padding", "string", required=True), IrAttr("data_format", "string", "NHWC"))
register(IrOp("MaxPool", (IrInput("x", POOL),), (IrOutput("y", POOL),), _POOL_ATTRS, outputs_from="infer",
              infer=_pool, doc="y = the maximum of each window."))
register(IrOp("AvgPool", (IrInput("x", POOL),), (IrOutput("y", POOL),), _POOL_ATTRS, outputs_from="infer",
              infer=_pool, doc="y = the mean of each window's elements inside x (SAME padding is not counted)."))
register(IrOp("MaxPoolGrad", (IrInput("x1", POOL), IrInput("x2", POOL), IrInput("grad", POOL)), (IrOutput("y", POOL),),
              _POOL_ATTRS, outputs_from="infer", infer=_max_pool_grad, same_dtype=("x1", "x2", "grad"),
              doc="y = each window's gradient routed to its first maximal element of x1."))
register(IrOp("AvgPoolGrad", (IrInput("orig_input_shape", ("int32",)), IrInput("input_grad", POOL)),
              (IrOutput("out_grad", POOL),), _POOL_ATTRS, outputs_from="infer", infer=_avg_pool_grad,
              doc="out_grad = each window's gradient shared evenly among its elements inside the input."))
