"""The nn family's GE prototypes (CANN ops-nn / ops-math REG_OPs, declared in third_party/cann/ge_reg_ops.txt): matrix products
(MatMulV2, BatchMatMulV2, Einsum), bias (BiasAdd, BiasAddGrad), SoftmaxV2 and the sparse softmax cross-entropy.
Executors: graph_ir/executors/nn.py; TF mappings: graph_ir/lowering/ops/nn.py."""

from __future__ import annotations

import re

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import INDICES, REALS, IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import broadcast_shape

MATMUL = ("float32", "float16", "int32", "bfloat16")
SOFTMAX = ("float64", "float16", "bfloat16", "float32")
LOSS = ("float64", "float16", "float32")


def _matrix_dims(op: IrOp, node: str, shape, transposed: bool, which: str) -> tuple[int, int]:
    if len(shape) < 2:
        raise GraphError(f"{op.type} {node!r}: {which} must have rank >= 2, got shape {list(shape)}")
    rows, cols = shape[-2], shape[-1]
    return (cols, rows) if transposed else (rows, cols)


def _matmul(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x1, x2, bias = inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None
    t1, t2 = (attrs["transpose_x1"], attrs["transpose_x2"]) if op.type == "MatMulV2" else (attrs["adj_x1"],
                                                                                            attrs["adj_x2"])
    if op.type == "MatMulV2" and (len(x1.shape), len(x2.shape)) != (2, 2):
        raise GraphError(f"MatMulV2 {node!r}: x1 and x2 must be matrices, got {list(x1.shape)} and {list(x2.shape)}")
    m, k = _matrix_dims(op, node, x1.shape, t1, "x1")
    k2, n = _matrix_dims(op, node, x2.shape, t2, "x2")
    if k != k2:
        raise GraphError(f"{op.type} {node!r}: x1 {list(x1.shape)} and x2 {list(x2.shape)} (transposed: {t1}, {t2}) "
                         f"have inner dimensions {k} and {k2}")
    batch = broadcast_shape(op, node, [TensorDesc("b", x1.dtype, x1.shape[:-2]), TensorDesc("b", x2.dtype,
                                                                                             x2.shape[:-2])])
    if bias is not None and bias.shape not in ((n,), (1,)):
        raise GraphError(f"{op.type} {node!r}: bias must have shape [{n}], got {list(bias.shape)}")
    return [TensorDesc("y", x1.dtype, (*batch, m, n))]


_MATMUL_INPUTS = (IrInput("x1", MATMUL), IrInput("x2", MATMUL), IrInput("bias", MATMUL, optional=True),
                  IrInput("offset_w", ("int8",), optional=True))
register(IrOp("MatMulV2", _MATMUL_INPUTS, (IrOutput("y", MATMUL),),
              (IrAttr("transpose_x1", "bool", False), IrAttr("transpose_x2", "bool", False),
               IrAttr("offset_x", "int", 0)), outputs_from="infer", infer=_matmul, same_dtype=("x1", "x2", "bias"),
              doc="y = op(x1) @ op(x2) (+ bias), op a transpose where transpose_x1 / transpose_x2."))
register(IrOp("BatchMatMulV2", _MATMUL_INPUTS, (IrOutput("y", MATMUL),),
              (IrAttr("adj_x1", "bool", False), IrAttr("adj_x2", "bool", False), IrAttr("offset_x", "int", 0)),
              outputs_from="infer", infer=_matmul, same_dtype=("x1", "x2", "bias"),
              doc="y = op(x1) @ op(x2) over broadcast batch dimensions, op a transpose where adj_x1 / adj_x2."))

_EINSUM_TERM = re.compile(r"^[a-zA-Z]*(\.\.\.)?[a-zA-Z]*$")


def parse_einsum(op_type: str, node: str, equation: str, count: int) -> tuple[list[str], str]:
    """The input terms and output term of an explicit einsum equation ("ab,bc->ac"); an ellipsis is refused."""
    lhs, arrow, out = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if not arrow or len(terms) != count or not all(_EINSUM_TERM.match(t) for t in [*terms, out]) \
            or "..." in equation:
        raise GraphError(f"{op_type} {node!r}: equation {equation!r} must be explicit ('ab,bc->ac'), without '...', "
                         f"with {count} input terms")
    return terms, out


def _einsum(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    terms, out = parse_einsum(op.type, node, attrs["equation"], len(inputs))
    sizes: dict[str, int] = {}
    for h, term in zip(inputs, terms):
        if len(term) != len(h.shape) or h.dtype != inputs[0].dtype:
            raise GraphError(f"Einsum {node!r}: term {term!r} does not fit input {h.dtype}{list(h.shape)}")
        for letter, d in zip(term, h.shape):
            if sizes.setdefault(letter, d) != d:
                raise GraphError(f"Einsum {node!r}: index {letter!r} has sizes {sizes[letter]} and {d}")
    if any(c not in sizes for c in out) or len(set(out)) != len(out):
        raise GraphError(f"Einsum {node!r}: output term {out!r} names an index no input has, or one twice")
    return [TensorDesc("y", inputs[0].dtype, tuple(sizes[c] for c in out))]


register(IrOp("Einsum", (IrInput("x", ("float16", "float32", "int32"), dynamic=True),),
              (IrOutput("y", ("float16", "float32", "int32")),),
              (IrAttr("equation", "string", required=True), IrAttr("N", "int", required=True, minimum=1)),
              outputs_from="infer", infer=_einsum, doc="y = einsum(equation, x0, x1, ...), explicit equations."))


def channel_axis(op: IrOp, node: str, attrs, rank: int) -> int:
    """The channel axis of data_format (NHWC: the last, NCHW: 1) for a tensor of `rank`."""
    fmt = attrs["data_format"]
    if fmt not in ("NHWC", "NCHW") or (fmt == "NCHW" and rank < 3) or rank < 2:
        raise GraphError(f"{op.type} {node!r}: data_format {fmt!r} with rank {rank}; expected NHWC (channels last) "
                         "or NCHW (rank >= 3)")
    return 1 if fmt == "NCHW" else rank - 1


def _bias_add(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x, bias = inputs
    c = channel_axis(op, node, attrs, len(x.shape))
    if bias.shape != (x.shape[c],):
        raise GraphError(f"BiasAdd {node!r}: bias must have shape [{x.shape[c]}] (x's channels), got "
                         f"{list(bias.shape)}")
    return [TensorDesc("y", x.dtype, x.shape)]


def _bias_add_grad(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    return [TensorDesc("y", x.dtype, (x.shape[channel_axis(op, node, attrs, len(x.shape))],))]


_FORMAT = IrAttr("data_format", "string", "NHWC")
register(IrOp("BiasAdd", (IrInput("x", REALS), IrInput("bias", REALS)), (IrOutput("y", REALS),), (_FORMAT,),
              outputs_from="infer", infer=_bias_add, same_dtype=("x", "bias"),
              doc="y = x + bias along the channel axis of data_format."))
register(IrOp("BiasAddGrad", (IrInput("x", REALS),), (IrOutput("y", REALS),), (_FORMAT,), outputs_from="infer",
              infer=_bias_add_grad, doc="y = x summed over all axes but the channel axis."))


def _softmax(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    rank = len(x.shape)
    if any(not -rank <= a < rank for a in attrs["axes"]) or not attrs["axes"]:
        raise GraphError(f"SoftmaxV2 {node!r}: axes {attrs['axes']} out of range for shape {list(x.shape)}")
    if len({a % rank for a in attrs["axes"]}) != len(attrs["axes"]):
        raise GraphError(f"SoftmaxV2 {node!r}: axes {attrs['axes']} name one axis twice (shape {list(x.shape)})")
    if attrs["half_to_float"]:
        raise GraphError(f"SoftmaxV2 {node!r}: half_to_float is not supported")
    return [TensorDesc("y", x.dtype, x.shape)]


register(IrOp("SoftmaxV2", (IrInput("x", SOFTMAX),), (IrOutput("y", SOFTMAX),),
              (IrAttr("axes", "list_int", [-1]), IrAttr("half_to_float", "bool", False)), outputs_from="infer",
              infer=_softmax, doc="y = exp(x - max) / sum(exp(x - max)) over `axes`."))


def _sparse_softmax_xent(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    features, labels = inputs
    if len(features.shape) != 2 or labels.shape != features.shape[:1]:
        raise GraphError(f"{op.type} {node!r}: features must be [batch, classes] and labels [batch], got "
                         f"{list(features.shape)} and {list(labels.shape)}")
    if features.shape[1] == 0:  # TF's kernel refuses it too
        raise GraphError(f"{op.type} {node!r}: features must have at least one class, got shape "
                         f"{list(features.shape)}")
    return [TensorDesc("loss", features.dtype, labels.shape), TensorDesc("backprop", features.dtype, features.shape)]


register(IrOp("SparseSoftmaxCrossEntropyWithLogits", (IrInput("features", LOSS), IrInput("labels", INDICES)),
              (IrOutput("loss", LOSS), IrOutput("backprop", LOSS)), outputs_from="infer", infer=_sparse_softmax_xent,
              doc="loss = -log softmax(features)[labels]; backprop = softmax(features) - onehot(labels)."))
