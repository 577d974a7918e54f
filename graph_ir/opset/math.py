"""The math family's GE prototypes (CANN ops-math REG_OPs, declared in third_party/cann/ge_reg_ops.txt): elementwise binary
ops, which broadcast as TF's do, unary ops, comparisons and selection, the activation gradients, AddN and the
reductions. Executors: graph_ir/executors/math.py; TF mappings: graph_ir/lowering/ops/math.py."""

from __future__ import annotations

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import TensorDesc
from graph_ir.ir.registry import ALL_DTYPES, COMPLEX, FLOATS, REALS, IrAttr, IrInput, IrOp, IrOutput, register
from graph_ir.ir.verify import const_value

NUMBERS = REALS  # CANN's NumberType, less the complex and quantized types graph_ir does not hold
UNARY_FLOATS = FLOATS  # CANN's UnaryDataType (f16 bf16 f32 f64, less complex)
FLOATING = ("float16", "float32", "float64")  # CANN's FloatingDataType (no bfloat16)

_INTS = ("int8", "int16", "int32", "int64")
_WIDE = ("float16", "float32", "float64", "int32", "int64")  # the older REG_OPs' common list (no bfloat16)
# complex64 where CANN declares it and a step needs it (the FFT family's gradients, graph_ir/opset/fft.py)
_BINARY = {"Add": (*FLOATS, *_INTS, "uint8", *COMPLEX), "AddV2": ("float16", "float32", "float64", *_INTS, "uint8", *COMPLEX),
           "Sub": (*REALS, *COMPLEX), "Mul": (*REALS, *COMPLEX), "RealDiv": (*REALS, *COMPLEX), "Maximum": _WIDE, "Minimum": _WIDE,
           "Pow": (*FLOATS, "int8", "int32", "int64", "uint8"),
           "FloorMod": _WIDE, "FloorDiv": REALS,
           "DivNoNan": ("float32", "float16", "float64", "int32", "int8", "uint8"),
           "SquaredDifference": _WIDE}
_UNARY = {"Exp": FLOATS, "Log": FLOATS, "Cos": FLOATS, "Sin": FLOATS, "Sqrt": FLOATS, "Rsqrt": FLOATS,
          "Square": (*FLOATS, "int32", "int64"), "Neg": (*FLOATS, "int32", "int64", *COMPLEX), "Abs": (*FLOATS, *_INTS),
          "Sign": _WIDE, "Floor": FLOATING,
          "Relu": ("float32", "float16", "float64", "int8", "int32", "int16", "int64", "uint8", "uint16"),
          "Sigmoid": UNARY_FLOATS, "Tanh": UNARY_FLOATS, "Erf": FLOATING, "Erfc": FLOATING,
          "Round": ("float16", "float32", "float64", "int32", "int64")}  # Round: half to even
# Gradients of activations: (inputs in IR order, output name, extra attrs). z = dy * f'(y) from the forward output
# y (ReluGrad: from the forward input `features`).
_COMPLEX_CONJ = (IrAttr("complex_conj", "bool", False),)
_GRADS = {"ReluGrad": (("gradients", "features"), "backprops", (), REALS),
          "SigmoidGrad": (("y", "dy"), "z", _COMPLEX_CONJ, UNARY_FLOATS),
          "TanhGrad": (("y", "dy"), "z", _COMPLEX_CONJ, UNARY_FLOATS),
          "RsqrtGrad": (("y", "dy"), "z", (), (*UNARY_FLOATS, "int32", "int8")),
          "SqrtGrad": (("y", "dy"), "z", (), UNARY_FLOATS)}
# Exp and Log carry y = base^(scale * x + shift) / log_base(shift + scale * x); base -1 means e (what TF's Exp and
# Log are, and what CANN's TF plugins set).
_EXP_LOG_ATTRS = (IrAttr("base", "float", -1.0), IrAttr("scale", "float", 1.0), IrAttr("shift", "float", 0.0))
_COMPARE = {t: REALS for t in ("Less", "LessEqual", "Greater", "GreaterEqual", "NotEqual")}
_COMPARE["Equal"] = (*FLOATS, *_INTS, "uint8", "bool")

for _type, _dtypes in _BINARY.items():
    register(IrOp(_type, (IrInput("x1", _dtypes), IrInput("x2", _dtypes)), (IrOutput("y", _dtypes),),
                  outputs_from="broadcast", same_dtype=("x1", "x2"), doc=f"y = {_type}(x1, x2), broadcast."))
for _type, _dtypes in _UNARY.items():
    register(IrOp(_type, (IrInput("x", _dtypes),), (IrOutput("y", _dtypes),),
                  _EXP_LOG_ATTRS if _type in ("Exp", "Log") else (), outputs_from="same", doc=f"y = {_type}(x)."))
for _type, (_ports, _out, _attrs, _dtypes) in _GRADS.items():
    register(IrOp(_type, tuple(IrInput(p, _dtypes) for p in _ports), (IrOutput(_out, _dtypes),), _attrs,
                  outputs_from="same", same_dtype=_ports, same_shape=_ports,
                  doc=f"{_out} = the gradient of the activation, from {', '.join(_ports)}."))
for _type, _dtypes in _COMPARE.items():
    register(IrOp(_type, (IrInput("x1", _dtypes), IrInput("x2", _dtypes)), (IrOutput("y", ("bool",)),),
                  outputs_from="compare", same_dtype=("x1", "x2"), doc=f"y = {_type}(x1, x2), bool, broadcast."))
register(IrOp("Select", (IrInput("condition", ("bool",)), IrInput("x1", ALL_DTYPES), IrInput("x2", ALL_DTYPES)),
              (IrOutput("y", ALL_DTYPES),), outputs_from="select", same_dtype=("x1", "x2"),
              doc="y = x1 where condition else x2."))
_BASIC = (*(d for d in ALL_DTYPES if d != "bool"), *COMPLEX)
register(IrOp("SelectV2", (IrInput("condition", ("bool",)), IrInput("then", _BASIC), IrInput("else", _BASIC)),
              (IrOutput("result", _BASIC),), outputs_from="select", same_dtype=("then", "else"),
              doc="result = then where condition else else, all three broadcast."))


def _add_n(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    first = inputs[0]
    for k, h in enumerate(inputs[1:], 1):
        if (h.dtype, h.shape) != (first.dtype, first.shape):
            raise GraphError(f"AddN {node!r}: x{k} is {h.dtype}{list(h.shape)} but x0 is "
                             f"{first.dtype}{list(first.shape)}; AddN adds tensors of one dtype and shape")
    return [TensorDesc("y", first.dtype, first.shape)]


register(IrOp("AddN", (IrInput("x", (*NUMBERS, *COMPLEX), dynamic=True),), (IrOutput("y", (*NUMBERS, *COMPLEX)),),
              (IrAttr("N", "int", required=True, minimum=1),), outputs_from="infer", infer=_add_n,
              doc="y = x0 + x1 + ... (N tensors of one shape)."))


def reduced_axes(op: IrOp, node: str, rank: int, handle, what: str = "axes") -> list[int]:
    """The Const axes of a reduction (or of Squeeze-like ops), each in [-rank, rank), made non-negative."""
    axes = const_value(op, node, handle, what).reshape(-1)
    out = []
    for a in axes.tolist():
        if not -rank <= a < max(rank, 1):
            raise GraphError(f"{op.type} {node!r}: axis {a} is out of range for rank {rank}")
        out.append(a % rank if rank else 0)
    if len(set(out)) != len(out):
        raise GraphError(f"{op.type} {node!r}: axes {axes.tolist()} name one axis twice")
    return sorted(out)


def _reduce(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    x = inputs[0]
    axes = reduced_axes(op, node, len(x.shape), inputs[1])
    if not axes and op.type == "ReduceMean" and attrs.get("noop_with_empty_axes", True) is False:
        axes = list(range(len(x.shape)))
    shape = tuple(1 if k in axes else d for k, d in enumerate(x.shape)) if attrs["keep_dims"] else \
        tuple(d for k, d in enumerate(x.shape) if k not in axes)
    return [TensorDesc("y", x.dtype, shape)]


for _type in ("ReduceSum", "ReduceMean", "ReduceProd", "ReduceMax", "ReduceMin"):
    _attrs = (IrAttr("keep_dims", "bool", False),)
    if _type == "ReduceMean":
        _attrs += (IrAttr("noop_with_empty_axes", "bool", True),)
    register(IrOp(_type, (IrInput("x", NUMBERS), IrInput("axes", ("int32", "int64"))), (IrOutput("y", NUMBERS),),
                  _attrs, outputs_from="infer", infer=_reduce,
                  doc=f"y = {_type[6:].lower()} of x over the Const `axes` (kept as size 1 with keep_dims)."))



def _l2_loss(op: IrOp, node: str, inputs, attrs) -> list[TensorDesc]:
    return [TensorDesc("y", inputs[0].dtype, ())]


register(IrOp("L2Loss", (IrInput("x", FLOATING),), (IrOutput("y", FLOATING),), outputs_from="infer", infer=_l2_loss,
              doc="y = sum(x ** 2) / 2 over every element: a scalar (TF's tf.nn.l2_loss, clip_by_global_norm)."))
