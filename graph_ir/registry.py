"""The GE IR registry: each GE op declared once, as CANN's REG_OP declares it (inputs in IR order with allowed
dtypes, outputs, attrs with types and defaults), plus how graph_ir infers its outputs.

The two optimizer ops are derived from op_spec (their one declared signature, with its GE side: type, input
order, TF inputs that are GE attrs); the plumbing ops are declared here. A ref (in-place) output is an output
whose name equals an input's name, as in GE: it is derived from the names, never listed by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

import op_spec
from graph_ir.dtypes import BY_NAME
from graph_ir.errors import GraphError

ALL_DTYPES = tuple(BY_NAME)  # every dtype graph_ir knows (graph_ir/dtypes.py)
# CANN's 12-dtype list of Const, Variable, IdentityN (and the released Identity) (hdr array_ops.h / state_ops.h): no bfloat16.
HDR_DTYPES = tuple(d for d in ALL_DTYPES if d != "bfloat16")

# How a node's output descs are known (graph_ir/verify.py has one rule per name):
#   "given"    the graph input's own desc (Data, RefData): passed by the builder or read from the file
#   "value"    the `value` attribute's dtype and shape (Const, Variable)
#   "refs"     each output is the input of the same name (in-place ops)
#   "same"     the first input's dtype and shape (Identity)
#   "cast"     the first input's shape with dtype `dst_type` (Cast)
#   "reshape"  the first input's dtype with the shape of the Const `shape` input (Reshape)
#   "none"     no outputs (NetOutput)
#   "broadcast"   the first input's dtype, the inputs' shapes broadcast (TF's elementwise binary ops)
#   "compare"     bool, the inputs' shapes broadcast
#   "select"      the dtype of the value inputs, the three inputs' shapes broadcast (Select, SelectV2)
#   "each"        one output per input, with its desc (IdentityN)
#   "fill"        the dtype of `value` with the shape in the Const `dims` input (Fill)
OUTPUT_RULES = ("given", "value", "refs", "same", "cast", "reshape", "none", "broadcast", "compare", "select", "each",
                "fill")


@dataclass(frozen=True)
class IrInput:
    name: str
    dtypes: tuple[str, ...]
    optional: bool = False
    dynamic: bool = False  # a list of tensors (NetOutput)
    scalar: bool = False  # one element (shape [] or [1])


@dataclass(frozen=True)
class IrOutput:
    name: str
    dtypes: tuple[str, ...]
    dynamic: bool = False  # a list of outputs, one per dynamic input (IdentityN)


@dataclass(frozen=True)
class IrAttr:
    name: str
    # "int", "float", "bool", "string", "tensor", "type" (a dtype, AttrDef.dt), "list_int", "dtype_int" (a dtype
    # that CANN declares as an Int attr holding its ge::DataType, AttrDef.i: Cast's dst_type)
    type: str
    default: object = None
    required: bool = False
    minimum: int | None = None  # for "int" attrs


@dataclass(frozen=True)
class IrOp:
    type: str
    inputs: tuple[IrInput, ...] = ()
    outputs: tuple[IrOutput, ...] = ()
    attrs: tuple[IrAttr, ...] = ()
    outputs_from: str = "refs"  # one of OUTPUT_RULES
    # Constraints beyond dtypes, checked by the verifier: inputs that share one dtype (a type symbol T) and inputs
    # that share one shape.
    same_dtype: tuple[str, ...] = ()
    same_shape: tuple[str, ...] = ()
    doc: str = ""

    @property
    def refs(self) -> dict[int, int]:
        """{output index: input index} for outputs named like an input: GE writes them in the input's memory."""
        names = [i.name for i in self.inputs]
        return {k: names.index(o.name) for k, o in enumerate(self.outputs) if o.name in names}

    def input(self, name: str) -> IrInput:
        return next(i for i in self.inputs if i.name == name)

    def attr(self, name: str) -> IrAttr:
        return next(a for a in self.attrs if a.name == name)


def _from_signature(sig: op_spec.OpSignature, doc: str) -> IrOp:
    """The GE prototype of one of our operators, from its declared signature's GE side."""
    ge = sig.ge
    inputs = []
    for name in ge.input_order:
        tf_input = sig.input(name)
        dtypes = ge.dtypes if tf_input.dtype == "T" else (tf_input.dtype,)
        inputs.append(IrInput(name, dtypes, scalar=tf_input.scalar))
    outputs = tuple(IrOutput(i.name, ge.dtypes) for i in inputs if sig.input(i.name).state)
    attrs = [IrAttr(a.name, a.type, a.default) for a in sig.ge_attrs]
    typed = tuple(i.name for i in sig.inputs if i.dtype == "T" and i.name in ge.input_order)
    shaped = tuple(i.name for i in sig.inputs if i.dtype == "T" and not i.scalar and i.name in ge.input_order)
    return IrOp(ge.type, tuple(inputs), outputs, tuple(attrs), same_dtype=typed, same_shape=shaped, doc=doc)


REGISTRY: dict[str, IrOp] = {}


def register(op: IrOp) -> IrOp:
    assert op.outputs_from in OUTPUT_RULES, op
    REGISTRY[op.type] = op
    return op


register(_from_signature(op_spec.POWER_SIGN, "PowerSign, in place on var and m (CANN InplaceApplyPowerSign)."))
register(_from_signature(op_spec.FUSED_EMA_ADAM,
                         "Adam/AdamW fused with an EMA of the weights, in place on var, m, v, s (CANN ApplyFusedEmaAdam)."))

# Plumbing (CANN array_ops.h / state_ops.h; NetOutput is GE-internal).
register(IrOp("Data", (IrInput("x", ALL_DTYPES, optional=True),), (IrOutput("y", ALL_DTYPES),),
              (IrAttr("index", "int", 0, minimum=0),), outputs_from="given", doc="A graph input, fed by position `index`."))
register(IrOp("RefData", (IrInput("x", ALL_DTYPES, optional=True),), (IrOutput("y", ALL_DTYPES),),
              (IrAttr("index", "int", 0, minimum=0),), outputs_from="given",
              doc="A graph input whose buffer ref ops may write in place."))
register(IrOp("Variable", (IrInput("x", HDR_DTYPES, optional=True),), (IrOutput("y", HDR_DTYPES),),
              (IrAttr("index", "int", 0), IrAttr("value", "tensor", required=True), IrAttr("container", "string", ""),
               IrAttr("shared_name", "string", "")), outputs_from="value",
              doc="Session-held state, shared by name; initialized from `value`."))
register(IrOp("Const", (), (IrOutput("y", HDR_DTYPES),), (IrAttr("value", "tensor", required=True),),
              outputs_from="value", doc="A constant tensor."))
# Identity keeps bfloat16 (ops-math identity_proto.h declares x, y ALL; the released hdr list has no bfloat16): the
# lowering reads bfloat16 resource variables through it. tests/graph_ir/test_reg_ops.py lists this exception.
register(IrOp("Identity", (IrInput("x", ALL_DTYPES),), (IrOutput("y", ALL_DTYPES),), outputs_from="same",
              same_dtype=("x",), doc="y = x (a snapshot of x when it runs)."))
register(IrOp("Cast", (IrInput("x", ALL_DTYPES),), (IrOutput("y", ALL_DTYPES),),
              (IrAttr("dst_type", "dtype_int", required=True),), outputs_from="cast",
              doc="y = x converted to dst_type (round to nearest even for floats)."))
register(IrOp("Reshape", (IrInput("x", ALL_DTYPES), IrInput("shape", ("int32", "int64"))), (IrOutput("y", ALL_DTYPES),),
              (IrAttr("axis", "int", 0), IrAttr("num_axes", "int", -1)), outputs_from="reshape",
              doc="y = x with the given shape."))
register(IrOp("NetOutput", (IrInput("x", ALL_DTYPES, dynamic=True),), (), outputs_from="none",
              doc="The graph's outputs, in order."))

# GE standard operators that lowered TF training steps contain (CANN ops-math REG_OPs; see
# ../shared/research/ge_standard_ops.md). Binary ops take (x1, x2) of one dtype and broadcast, as TF's do.
# Each dtype list is the part of REALS that the op's REG_OP allows (ge_reg_ops.md, checked by
# tests/graph_ir/test_reg_ops.py): the released CANN lists have no bfloat16 for AddV2, Maximum, Minimum, Sign, Floor
# and FloorMod, and fewer small integers than TF for several ops.
FLOATS = ("float16", "bfloat16", "float32", "float64")
REALS = (*FLOATS, "int8", "int16", "int32", "int64", "uint8", "uint16")
FLOATS_NO_BF16 = ("float16", "float32", "float64")
_SIGNED = ("int8", "int16", "int32", "int64")
_BINARY = {"Add": (*FLOATS, *_SIGNED, "uint8"), "AddV2": (*FLOATS_NO_BF16, *_SIGNED, "uint8"), "Sub": REALS,
           "Mul": REALS, "RealDiv": REALS, "Maximum": (*FLOATS_NO_BF16, "int32", "int64"),
           "Minimum": (*FLOATS_NO_BF16, "int32", "int64"), "Pow": (*FLOATS, "int8", "int32", "int64", "uint8"),
           "FloorMod": ("int32", "int64", *FLOATS_NO_BF16), "FloorDiv": REALS}
_UNARY = {"Exp": FLOATS, "Log": FLOATS, "Cos": FLOATS, "Sin": FLOATS, "Sqrt": FLOATS, "Rsqrt": FLOATS,
          "Square": (*FLOATS, "int32", "int64"), "Neg": (*FLOATS, "int32", "int64"), "Abs": (*FLOATS, *_SIGNED),
          "Sign": (*FLOATS_NO_BF16, "int32", "int64"), "Floor": FLOATS_NO_BF16}
# Less, LessEqual, Greater, GreaterEqual, NotEqual take RealNumberType (no bool); Equal takes bool but no uint16.
_COMPARE_DTYPES = {"Equal": (*FLOATS, *_SIGNED, "uint8", "bool")}
# Exp and Log carry y = base^(scale * x + shift) / log_base(shift + scale * x); base -1 means e (what TF's Exp and
# Log are, and what CANN's TF plugins set).
_EXP_LOG_ATTRS = (IrAttr("base", "float", -1.0), IrAttr("scale", "float", 1.0), IrAttr("shift", "float", 0.0))
_COMPARE = ("Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual")

for _type, _dtypes in _BINARY.items():
    register(IrOp(_type, (IrInput("x1", _dtypes), IrInput("x2", _dtypes)), (IrOutput("y", _dtypes),),
                  outputs_from="broadcast", same_dtype=("x1", "x2"), doc=f"y = {_type}(x1, x2), broadcast."))
for _type, _dtypes in _UNARY.items():
    register(IrOp(_type, (IrInput("x", _dtypes),), (IrOutput("y", _dtypes),),
                  _EXP_LOG_ATTRS if _type in ("Exp", "Log") else (), outputs_from="same", doc=f"y = {_type}(x)."))
for _type in _COMPARE:
    _dtypes = _COMPARE_DTYPES.get(_type, REALS)
    register(IrOp(_type, (IrInput("x1", _dtypes), IrInput("x2", _dtypes)), (IrOutput("y", ("bool",)),),
                  outputs_from="compare", same_dtype=("x1", "x2"), doc=f"y = {_type}(x1, x2), bool, broadcast."))
register(IrOp("Select", (IrInput("condition", ("bool",)), IrInput("x1", ALL_DTYPES), IrInput("x2", ALL_DTYPES)),
              (IrOutput("y", ALL_DTYPES),), outputs_from="select", same_dtype=("x1", "x2"),
              doc="y = x1 where condition else x2."))
_BASIC = tuple(d for d in ALL_DTYPES if d != "bool")  # SelectV2's BasicType: no bool
register(IrOp("SelectV2", (IrInput("condition", ("bool",)), IrInput("then", _BASIC), IrInput("else", _BASIC)),
              (IrOutput("result", _BASIC),), outputs_from="select", same_dtype=("then", "else"),
              doc="result = then where condition else else, all three broadcast."))
# In place on their first input (CANN names it `ref`, AssignSub's `var`), which must be a Variable.
# Assign also takes bool; AssignAdd (BasicType) and AssignSub (NumberType) do not.
for _type, _port in (("Assign", "ref"), ("AssignAdd", "ref"), ("AssignSub", "var")):
    _dtypes = REALS + ("bool",) if _type == "Assign" else REALS
    register(IrOp(_type, (IrInput(_port, _dtypes), IrInput("value", _dtypes)), (IrOutput(_port, _dtypes),),
                  (IrAttr("use_locking", "bool", False),) + ((IrAttr("validate_shape", "bool", True),)
                                                            if _type == "Assign" else ()),
                  same_dtype=(_port, "value"), same_shape=(_port, "value"),
                  doc=f"{_port} {'=' if _type == 'Assign' else '+=' if _type == 'AssignAdd' else '-='} value, in place."))
register(IrOp("Fill", (IrInput("dims", ("int32", "int64")), IrInput("value", ALL_DTYPES, scalar=True)),
              (IrOutput("y", ALL_DTYPES),), outputs_from="fill", doc="y = value everywhere, of shape dims."))
register(IrOp("IdentityN", (IrInput("x", HDR_DTYPES, dynamic=True),), (IrOutput("y", HDR_DTYPES, dynamic=True),),
              outputs_from="each", doc="y_k = x_k (snapshots)."))

# Node types whose outputs are graph inputs or state: the only producers an in-place input may come from (GE wants a
# Variable or RefData there; a Data input is the graph's own copy of the fed array, written as GE writes it).
WRITABLE_SOURCES = ("Variable", "RefData", "Data")


def get(op_type: str) -> IrOp:
    if op_type not in REGISTRY:
        raise GraphError(f"no GE op {op_type!r} in the registry; registered: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[op_type]
