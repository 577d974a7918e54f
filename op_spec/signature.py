"""The vocabulary of an operator's signature: inputs, attributes, value rules and the GE side.

Pure Python (standard library only), so that every face of the operators (the TF registration and C++ checks,
which op_spec/codegen.py generates, the raw-op wrappers, the Keras and TF1 optimizers, the GE IR prototypes and
graph_ir.kernels) can read it without importing a framework.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, replace

# Op type names registered by the library: stock names behind one prefix, so they never collide with stock TF.
OP_PREFIX = "TfPlugin"

# dtype name -> the name TensorFlow's REGISTER_OP type lists use.
TF_TYPE_NAMES = {"float16": "half", "bfloat16": "bfloat16", "float32": "float", "float64": "double",
                 "int64": "int64"}


def as_float32(x: float) -> float:
    """x rounded to float32 (what a TF float attribute holds); Inf where float32 overflows."""
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def float32_below(x: float) -> float:
    """The largest float32 below x (x a float32)."""
    return as_float32(math.nextafter(x, -math.inf)) if x != 0 else -1.401298464324817e-45


FLOAT32_MIN_NORMAL = 2.0**-126


def flush_subnormal(x: float) -> float:
    """x, or the signed zero when x is a float32 subnormal (what TF's flush-to-zero makes of it)."""
    return math.copysign(0.0, x) if 0 < abs(x) < FLOAT32_MIN_NORMAL else x


@dataclass(frozen=True)
class Rule:
    """A rule on a value: an interval, optionally finite, or a set of choices. ``text`` is how errors say it.

    Accepted: ``low <= x`` (``low < x`` when ``low_open``), ``x < high`` (or ``<=`` when not ``high_open``),
    ``x`` finite when ``finite``, ``x in choices`` when choices are given. NaN is never accepted. A float32
    subnormal is judged as the signed zero the kernels see (TensorFlow flushes subnormals to zero), so that the
    Python check and the C++ check agree whatever the thread's floating-point mode.
    """

    text: str
    low: float | None = None
    low_open: bool = False
    high: float | None = None
    high_open: bool = True
    finite: bool = False
    choices: tuple[int, ...] = ()

    def accepts(self, x: float) -> bool:
        if self.choices:
            return x in self.choices
        if math.isnan(x) or (self.finite and math.isinf(x)):
            return False
        x = flush_subnormal(x)
        if self.low is not None and not (x > self.low if self.low_open else x >= self.low):
            return False
        return self.high is None or (x < self.high if self.high_open else x <= self.high)

    def probes(self) -> list[tuple[float, bool]]:
        """Float32 values on both sides of each boundary, with whether the rule accepts them (for the tests that
        check every face of the operator against the spec)."""
        if self.choices:
            values = [min(self.choices) - 1, *self.choices, max(self.choices) + 1]
            return [(v, self.accepts(v)) for v in values]
        values = [math.nan]
        if self.finite:
            values += [math.inf, -math.inf]
        for edge in (self.low, self.high):
            if edge is not None:
                values += [float32_below(edge), edge, -float32_below(-edge)]
        return [(v, self.accepts(v)) for v in values]


UNIT_INTERVAL = Rule("in [0, 1)", low=0.0, high=1.0)
POSITIVE_FINITE = Rule("a finite number > 0", low=0.0, low_open=True, finite=True)
NON_NEGATIVE_FINITE = Rule("a finite number >= 0", low=0.0, finite=True)
FINITE = Rule("finite", finite=True)
AT_LEAST_ONE = Rule(">= 1", low=1.0)


@dataclass(frozen=True)
class Input:
    """One op input. ``dtype`` is "T" (the op's type attribute) or a fixed dtype name; ``state`` marks the variables
    the op updates in place (var, m, v, s); ``scalar`` an input of exactly one element, shape [] or [1]. ``rule``
    is checked on a scalar's value when the op runs, only when the bool attribute ``rule_when`` is true (if set).
    ``many`` marks a list of N tensors (the multi-tensor ops' vars and grads)."""

    name: str
    dtype: str = "T"
    state: bool = False
    scalar: bool = False
    rule: Rule | None = None
    rule_when: str | None = None
    doc: str = ""
    many: bool = False


@dataclass(frozen=True)
class Attr:
    """An attribute: ``type`` is "float" (float32), "int", "bool" or "list(int)"; ``rule`` its valid values."""

    name: str
    type: str
    default: float | int | bool | tuple[int, ...]
    rule: Rule | None = None
    doc: str = ""


@dataclass(frozen=True)
class GeSide:
    """How the operator appears in CANN's Graph Engine IR (REG_OP): its type, the input order, which TF inputs are
    GE attributes there (with their GE defaults), TF attributes GE lacks, and the dtypes CANN's OpDef registers.
    Outputs are the state inputs under the same names (ref / in-place outputs), in IR input order."""

    type: str
    input_order: tuple[str, ...]
    attr_inputs: tuple[Attr, ...] = ()
    tf_only_attrs: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ("float16", "bfloat16", "float32")


class _Lookups:
    """What both kinds of signature answer from their ``inputs`` and ``attrs``."""

    inputs: tuple[Input, ...]
    attrs: tuple[Attr, ...]

    @property
    def state_inputs(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.inputs if i.state)

    def input(self, name: str) -> Input:
        return next(i for i in self.inputs if i.name == name)

    @property
    def defaults(self) -> dict[str, float | int | bool | tuple[int, ...]]:
        """Attribute name -> default value (TF attributes; GE-only attributes such as lr are in ge.attr_inputs)."""
        return {a.name: a.default for a in self.attrs}


@dataclass(frozen=True)
class OpSignature(_Lookups):
    """One operator: its TF inputs in order, its attributes, the allowed T, its formula and its GE side."""

    name: str  # "PowerSign" -> TfPluginApplyPowerSign / TfPluginResourceApplyPowerSign
    inputs: tuple[Input, ...]
    attrs: tuple[Attr, ...]
    dtypes: tuple[str, ...]
    formula: str
    ge: GeSide

    @property
    def ref_op(self) -> str:
        return f"{OP_PREFIX}Apply{self.name}"

    @property
    def resource_op(self) -> str:
        return f"{OP_PREFIX}ResourceApply{self.name}"

    def attr(self, name: str) -> Attr:
        return next(a for a in (*self.attrs, *self.ge.attr_inputs) if a.name == name)

    @property
    def ge_attrs(self) -> tuple[Attr, ...]:
        """The GE operator's attributes: the TF inputs GE makes attributes (lr), then the TF attributes GE has."""
        return (*self.ge.attr_inputs, *(a for a in self.attrs if a.name not in self.ge.tf_only_attrs))


@dataclass(frozen=True)
class MultiOpSignature(_Lookups):
    """The multi-tensor form of an operator: one call updates N variables of one dtype.

    The variables and their gradients are lists (``vars``, ``grads``). The state the optimizer keeps (PowerSign's m;
    FusedEmaAdam's m, v, s) is one flat 1-D variable per name, holding every variable's state concatenated in
    ``vars`` order: variable k owns elements [offset_k, offset_k + size_k), offset_k the sum of the sizes before it
    (or ``state_offsets[k]`` when that attribute is given, for a subset of a larger layout). Each variable's result
    is bitwise what the single-tensor operator gives. Resource variables only; GE has no such operator, so the
    lowering expands it into one GE operator per variable.
    """

    single: OpSignature
    extra_attrs: tuple[Attr, ...] = ()

    @property
    def name(self) -> str:
        return f"Multi{self.single.name}"

    @property
    def resource_op(self) -> str:
        return f"{OP_PREFIX}ResourceApply{self.name}"

    @property
    def flat_state(self) -> tuple[str, ...]:
        """The optimizer-state inputs, each one flat variable."""
        return tuple(n for n in self.single.state_inputs if n != "var")

    @property
    def inputs(self) -> tuple[Input, ...]:
        out = []
        for i in self.single.inputs:
            if i.name == "var":
                i = replace(i, name="vars", many=True, doc="the N variables, each updated in place")
            elif i.name == "grad":
                i = replace(i, name="grads", many=True, doc="the N gradients, grads[k] of vars[k]'s shape")
            elif i.state:
                i = replace(i, doc=f"{i.doc}: one flat 1-D variable, every variable's {i.name} in vars order")
            out.append(i)
        return tuple(out)

    @property
    def attrs(self) -> tuple[Attr, ...]:
        return (*self.single.attrs, *self.extra_attrs)

    @property
    def dtypes(self) -> tuple[str, ...]:
        return self.single.dtypes

    @property
    def formula(self) -> str:
        return (f"for each k: {self.single.name} on vars[k] and grads[k], with the state slices "
                f"[offset_k, offset_k + size_k) of {', '.join(self.flat_state)}\n{self.single.formula}")

    def attr(self, name: str) -> Attr:
        return next(a for a in (*self.attrs, *self.single.ge.attr_inputs) if a.name == name)
