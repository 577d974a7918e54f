"""The GE IR registry: each GE op declared once, as CANN's REG_OP declares it (inputs in IR order with allowed
dtypes, outputs, attrs with types and defaults).

The two optimizer ops are derived from tf_plugin/signatures.py (their one declared signature, with its GE side:
type, input order, TF inputs that are GE attrs); the plumbing ops are declared here. A ref (in-place) output is an
output whose name equals an input's name, as in GE: it is derived from the names, never listed by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from graph_ir.dtypes import BY_NAME
from tf_plugin import signatures

ALL_DTYPES = tuple(BY_NAME)  # every dtype graph_ir knows (graph_ir/dtypes.py)


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


@dataclass(frozen=True)
class IrAttr:
    name: str
    type: str  # "int", "float", "bool", "string", "tensor", "type" (a dtype), "list_int"
    default: object = None
    required: bool = False


@dataclass(frozen=True)
class IrOp:
    type: str
    inputs: tuple[IrInput, ...] = ()
    outputs: tuple[IrOutput, ...] = ()
    attrs: tuple[IrAttr, ...] = ()
    # Constraints beyond dtypes, checked by the graph verifier: inputs that share one dtype (a type symbol T),
    # inputs that share one shape, and the fixed dtype of named inputs.
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


_ATTR_TYPES = {"float": "float", "int": "int", "bool": "bool"}


def _from_signature(sig: signatures.OpSignature, doc: str) -> IrOp:
    """The GE prototype of one of our operators, from its declared signature's GE side."""
    ge = sig.ge
    by_name = {i.name: i for i in sig.inputs}
    inputs = []
    for name in ge.input_order:
        tf_input = by_name[name]
        dtypes = ge.dtypes if tf_input.dtype == "T" else (tf_input.dtype,)
        inputs.append(IrInput(name, dtypes, scalar=tf_input.scalar))
    outputs = tuple(IrOutput(i.name, ge.dtypes) for i in inputs if by_name[i.name].state)
    attrs = [IrAttr(a.name, _ATTR_TYPES[a.type], a.default) for a in ge.attr_inputs]
    attrs += [IrAttr(a.name, _ATTR_TYPES[a.type], a.default) for a in sig.attrs if a.name not in ge.tf_only_attrs]
    typed = tuple(i.name for i in sig.inputs if i.dtype == "T" and i.name in ge.input_order)
    shaped = tuple(i.name for i in sig.inputs if i.dtype == "T" and not i.scalar and i.name in ge.input_order)
    return IrOp(ge.type, tuple(inputs), outputs, tuple(attrs), same_dtype=typed, same_shape=shaped, doc=doc)


REGISTRY: dict[str, IrOp] = {}


def register(op: IrOp) -> IrOp:
    REGISTRY[op.type] = op
    return op


register(_from_signature(signatures.POWER_SIGN, "PowerSign, in place on var and m (CANN InplaceApplyPowerSign)."))
register(_from_signature(signatures.FUSED_EMA_ADAM,
                         "Adam/AdamW fused with an EMA of the weights, in place on var, m, v, s (CANN ApplyFusedEmaAdam)."))

# Plumbing (CANN array_ops.h / state_ops.h; NetOutput is GE-internal).
register(IrOp("Data", (IrInput("x", ALL_DTYPES, optional=True),), (IrOutput("y", ALL_DTYPES),),
              (IrAttr("index", "int", 0),), doc="A graph input, fed by position `index`."))
register(IrOp("RefData", (IrInput("x", ALL_DTYPES, optional=True),), (IrOutput("y", ALL_DTYPES),),
              (IrAttr("index", "int", 0),), doc="A graph input whose buffer ref ops may write in place."))
register(IrOp("Variable", (IrInput("x", ALL_DTYPES, optional=True),), (IrOutput("y", ALL_DTYPES),),
              (IrAttr("index", "int", 0), IrAttr("value", "tensor"), IrAttr("container", "string", ""),
               IrAttr("shared_name", "string", "")),
              doc="Session-held state, shared by name; initialized from `value`."))
register(IrOp("Const", (), (IrOutput("y", ALL_DTYPES),), (IrAttr("value", "tensor", required=True),),
              doc="A constant tensor."))
register(IrOp("Identity", (IrInput("x", ALL_DTYPES),), (IrOutput("y", ALL_DTYPES),), same_dtype=("x",),
              doc="y = x (a snapshot of x when it runs)."))
register(IrOp("Cast", (IrInput("x", ALL_DTYPES),), (IrOutput("y", ALL_DTYPES),),
              (IrAttr("dst_type", "type", required=True), IrAttr("truncate", "bool", False)),
              doc="y = x converted to dst_type (round to nearest even for floats)."))
register(IrOp("Reshape", (IrInput("x", ALL_DTYPES), IrInput("shape", ("int32", "int64"))), (IrOutput("y", ALL_DTYPES),),
              (IrAttr("axis", "int", 0), IrAttr("num_axes", "int", -1)), doc="y = x with the given shape."))
register(IrOp("NetOutput", (IrInput("x", ALL_DTYPES, dynamic=True),), (), doc="The graph's outputs, in order."))


def get(op_type: str) -> IrOp:
    if op_type not in REGISTRY:
        from graph_ir.graph import GraphError

        raise GraphError(f"no GE op {op_type!r} in the registry; registered: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[op_type]
