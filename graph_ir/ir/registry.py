"""The GE IR registry: each GE op declared once, as CANN's REG_OP declares it (inputs in IR order with allowed
dtypes, outputs, attrs with types and defaults), plus how graph_ir infers its outputs.

The two optimizer ops are derived from op_spec (their one declared signature, with its GE side: type, input
order, TF inputs that are GE attrs); the plumbing ops are declared here. A ref (in-place) output is an output
whose name equals an input's name, as in GE: it is derived from the names, never listed by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import op_spec
from graph_ir.ir.dtypes import BY_NAME, COMPLEX64
from graph_ir.ir.errors import GraphError

ALL_DTYPES = tuple(BY_NAME)  # every dtype graph_ir knows (graph_ir/ir/dtypes.py)
WITH_VARIANT = (*ALL_DTYPES, "variant")  # what passes TensorList handles on: graph inputs and outputs, Identity
COMPLEX = (COMPLEX64.name,)  # the one complex dtype: only on the ops declared with it (graph_ir/ir/dtypes.py COMPLEX64)

# How a node's output descs are known (graph_ir/ir/output_rules.py has one rule per name):
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
#   "infer"       the op's own `infer` function (declared beside the op in its family module, graph_ir/opset)
#   "subgraphs"   the functional ops (If, Case, While): their subgraphs' NetOutput descs (graph_ir/opset/control.py)
#   "valued"      sizes that depend on the input's values (Where's count): given by the builder or the file (-1 in a
#                 template), and checked by the op's own `infer` function, called with the given descs
OUTPUT_RULES = ("given", "value", "refs", "same", "cast", "reshape", "none", "broadcast", "compare", "select", "each",
                "fill", "infer", "subgraphs", "valued")


@dataclass(frozen=True)
class IrInput:
    name: str
    dtypes: tuple[str, ...]
    optional: bool = False
    dynamic: bool = False  # a list of tensors (NetOutput, AddN's x); at most one per op
    scalar: bool = False  # one element (shape [] or [1])


@dataclass(frozen=True)
class IrOutput:
    name: str
    dtypes: tuple[str, ...]
    dynamic: bool = False  # a list of outputs, one per dynamic input (IdentityN)


@dataclass(frozen=True)
class IrAttr:
    name: str
    # "int", "float", "bool", "string", "tensor", "type" (a dtype, AttrDef.dt), "list_int", "list_float", "dtype_int" (a dtype
    # that CANN declares as an Int attr holding its ge::DataType, AttrDef.i: Cast's dst_type)
    type: str
    default: object = None
    required: bool = False
    minimum: int | None = None  # for "int" attrs
    # Set by Ascend's TF adapter and read by CANN's infer functions, but not a REG_OP member: the convolutions'
    # `padding` ("SAME" or "VALID", from which ops/built-in/op_proto/nn_calculation_ops.cc recomputes `pads` at each
    # input size). Left out of a node unless given.
    adapter: bool = False


@dataclass(frozen=True)
class IrOp:
    type: str
    inputs: tuple[IrInput, ...] = ()
    outputs: tuple[IrOutput, ...] = ()
    attrs: tuple[IrAttr, ...] = ()
    outputs_from: str = "refs"  # one of OUTPUT_RULES, or "infer" for the op's own rule below
    # The op's own output rule (the op families in graph_ir/opset): (op, node name, inputs, attrs) -> output descs.
    infer: Callable | None = field(default=None, compare=False, repr=False)
    # Constraints beyond dtypes, checked by the verifier: inputs that share one dtype (a type symbol T) and inputs
    # that share one shape.
    same_dtype: tuple[str, ...] = ()
    same_shape: tuple[str, ...] = ()
    doc: str = ""
    # The REG_OP's .GRAPH members in IR order (If: then_branch, else_branch; While: cond, body), or its one
    # .DYNAMIC_GRAPH member (Case: branches) when dynamic_graph: a node of the op holds that many subgraphs.
    graphs: tuple[str, ...] = ()
    dynamic_graph: bool = False

    @property
    def dynamic_input(self) -> int | None:
        """The index of the op's dynamic (list) input, if it has one."""
        return next((k for k, i in enumerate(self.inputs) if i.dynamic), None)

    def list_count(self, given: int) -> int:
        """How many of `given` inputs (in IR order) the dynamic list holds: the fixed inputs take one each."""
        return given - (len(self.inputs) - 1)

    def expand_inputs(self, given: int) -> list[tuple[IrInput, int | None]]:
        """Each of `given` inputs' declaration, with its position in the dynamic list (None for a fixed input)."""
        dyn = self.dynamic_input
        if dyn is None:
            return [(i, None) for i in self.inputs[:given]]
        return [*((i, None) for i in self.inputs[:dyn]),
                *((self.inputs[dyn], k) for k in range(self.list_count(given))),
                *((i, None) for i in self.inputs[dyn + 1:])]

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
    assert op.outputs_from in OUTPUT_RULES and (op.infer is not None) == (op.outputs_from in ("infer", "valued")), op
    assert op.type not in REGISTRY, f"GE op {op.type} is declared twice"
    REGISTRY[op.type] = op
    return op


register(_from_signature(op_spec.POWER_SIGN, "PowerSign, in place on var and m (CANN InplaceApplyPowerSign)."))
register(_from_signature(op_spec.FUSED_EMA_ADAM,
                         "Adam/AdamW fused with an EMA of the weights, in place on var, m, v, s (CANN ApplyFusedEmaAdam)."))

# Plumbing (CANN array_ops.h / state_ops.h; NetOutput is GE-internal).
register(IrOp("Data", (IrInput("x", (*WITH_VARIANT, *COMPLEX), optional=True),),
              (IrOutput("y", (*WITH_VARIANT, *COMPLEX)),),
              (IrAttr("index", "int", 0, minimum=0),), outputs_from="given", doc="A graph input, fed by position `index`."))
register(IrOp("RefData", (IrInput("x", ALL_DTYPES, optional=True),), (IrOutput("y", ALL_DTYPES),),
              (IrAttr("index", "int", 0, minimum=0),), outputs_from="given",
              doc="A graph input whose buffer ref ops may write in place."))
register(IrOp("Variable", (IrInput("x", ALL_DTYPES, optional=True),), (IrOutput("y", ALL_DTYPES),),
              (IrAttr("index", "int", 0), IrAttr("value", "tensor", required=True), IrAttr("container", "string", ""),
               IrAttr("shared_name", "string", "")), outputs_from="value",
              doc="Session-held state, shared by name; initialized from `value`."))
register(IrOp("Const", (), (IrOutput("y", ALL_DTYPES),), (IrAttr("value", "tensor", required=True),),
              outputs_from="value", doc="A constant tensor."))
# Identity keeps bfloat16 (ops-math identity_proto.h declares x, y ALL; the released hdr list has no bfloat16): the
# lowering reads bfloat16 resource variables through it. tests/graph_ir/test_reg_ops.py lists this exception.
register(IrOp("Identity", (IrInput("x", (*WITH_VARIANT, *COMPLEX)),), (IrOutput("y", (*WITH_VARIANT, *COMPLEX)),),
              outputs_from="same",
              same_dtype=("x",), doc="y = x (a snapshot of x when it runs)."))
register(IrOp("Cast", (IrInput("x", (*ALL_DTYPES, *COMPLEX)),), (IrOutput("y", (*ALL_DTYPES, *COMPLEX)),),
              (IrAttr("dst_type", "dtype_int", required=True),), outputs_from="cast",
              doc="y = x converted to dst_type (round to nearest even for floats)."))
register(IrOp("Reshape", (IrInput("x", (*ALL_DTYPES, *COMPLEX)), IrInput("shape", ("int32", "int64"))),
              (IrOutput("y", (*ALL_DTYPES, *COMPLEX)),),
              (IrAttr("axis", "int", 0), IrAttr("num_axes", "int", -1)), outputs_from="reshape",
              doc="y = x with the given shape."))
register(IrOp("NetOutput", (IrInput("x", (*WITH_VARIANT, *COMPLEX), dynamic=True),), (), outputs_from="none",
              doc="The graph's outputs, in order."))

FLOATS = ("float16", "bfloat16", "float32", "float64")
REALS = (*FLOATS, "int8", "int16", "int32", "int64", "uint8", "uint16")
INDICES = ("int32", "int64")

# In place on their first input (CANN names it `ref`, AssignSub's `var`), which must be a Variable.
# Assign also takes bool; AssignAdd (BasicType) and AssignSub (NumberType) do not.
for _type, _port in (("Assign", "ref"), ("AssignAdd", "ref"), ("AssignSub", "var")):
    _dtypes = REALS + ("bool",) if _type == "Assign" else REALS  # CANN: Assign BasicType + bool, the others Number
    register(IrOp(_type, (IrInput(_port, _dtypes), IrInput("value", _dtypes)), (IrOutput(_port, _dtypes),),
                  ((IrAttr("validate_shape", "bool", True),) if _type == "Assign" else ())
                  + (IrAttr("use_locking", "bool", False),),
                  same_dtype=(_port, "value"), same_shape=(_port, "value"),
                  doc=f"{_port} {'=' if _type == 'Assign' else '+=' if _type == 'AssignAdd' else '-='} value, in place."))
register(IrOp("IdentityN", (IrInput("x", ALL_DTYPES, dynamic=True),), (IrOutput("y", ALL_DTYPES, dynamic=True),),
              outputs_from="each", doc="y_k = x_k (snapshots)."))

# Node types whose outputs are graph inputs or state: the only producers an in-place input may come from (GE wants a
# Variable or RefData there; a Data input is the graph's own copy of the fed array, written as GE writes it).
WRITABLE_SOURCES = ("Variable", "RefData", "Data")


def get(op_type: str, node: str | None = None) -> IrOp:
    """The prototype of `op_type`; an unknown type is a GraphError naming the node (when given) and the type."""
    if op_type not in REGISTRY:
        where = f"node {node!r:.80}: " if node is not None else ""
        raise GraphError(f"{where}no GE op {op_type!r:.80} in the registry (unknown op type); registered: "
                         f"{', '.join(sorted(REGISTRY))}")
    return REGISTRY[op_type]
