"""A reader of CANN's REG_OP declarations as third_party/cann/ge_reg_ops.txt lists them (one `REG_OP(Name)` line,
then one `.INPUT(...)`, `.OUTPUT(...)`, `.ATTR(...)`, ... line each), for checking graph_ir's registry against them.

Dtypes come back as graph_ir dtype names (float32, bfloat16, int64, bool, ...); GE dtypes graph_ir does not have keep
their own names (DT_COMPLEX64, DT_STRING, ...). The TensorType groups are expanded as metadef's
inc/external/graph/types.h defines them. A dtype list this reader cannot read (a type symbol
such as "T1" without a `.DATATYPE` line, a misspelt group) is None: the caller decides, it is never guessed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from graph_ir.ir.dtypes import BY_NAME

REPO_ROOT = Path(__file__).resolve().parents[2]
# The declarations the project checks against, kept in the repository with their source (the file's header).
REG_OPS_FILE = REPO_ROOT / "third_party" / "cann" / "ge_reg_ops.txt"

_GRAPH_IR_NAMES = {"DT_FLOAT": "float32", "DT_FLOAT32": "float32", "DT_FLOAT64": "float64", "DT_FLOAT16": "float16", "DT_BF16": "bfloat16", "DT_DOUBLE": "float64",
                   "DT_INT8": "int8", "DT_INT16": "int16", "DT_INT32": "int32", "DT_INT64": "int64",
                   "DT_UINT8": "uint8", "DT_UINT16": "uint16", "DT_UINT32": "uint32", "DT_UINT64": "uint64",
                   "DT_BOOL": "bool", "DT_VARIANT": "variant", "DT_COMPLEX64": "complex64"}
# A few declarations write bare names (`TensorType({float16})`, `BOOL`) or misspell one (OnesLike's DI_UINT16).
_BARE_NAMES = {**{v: v for v in _GRAPH_IR_NAMES.values()}, "float": "float32", "BOOL": "bool", "DI_UINT16": "uint16"}


def _dts(*names: str) -> frozenset[str]:
    return frozenset(_GRAPH_IR_NAMES.get(f"DT_{n}", f"DT_{n}") for n in names)


# metadef inc/external/graph/types.h (struct TensorType's static groups).
_QUANTIFIED = _dts("QINT16", "QINT32", "QINT8", "QUINT16", "QUINT8")
_ORDINARY = _dts("BOOL", "COMPLEX128", "COMPLEX64", "DOUBLE", "FLOAT", "FLOAT16", "INT16", "INT32", "INT64", "INT8",
                 "UINT16", "UINT32", "UINT64", "UINT8", "BF16", "COMPLEX32")
_ALL = _ORDINARY | _QUANTIFIED | _dts("RESOURCE", "STRING")
_BASIC = _ALL - _dts("BOOL", "RESOURCE", "STRING")
GROUPS: dict[str, frozenset[str]] = {
    "ALL": _ALL,
    "QuantifiedType": _QUANTIFIED,
    "OrdinaryType": _ORDINARY,
    "BasicType": _BASIC,
    "NumberType": _BASIC - _dts("QINT16", "QUINT16"),
    "RealNumberType": _dts("DOUBLE", "FLOAT", "FLOAT16", "INT16", "INT32", "INT64", "INT8", "UINT16", "UINT32",
                           "UINT64", "UINT8", "BF16"),
    "ComplexDataType": _dts("COMPLEX128", "COMPLEX64", "COMPLEX32"),
    "IntegerDataType": _dts("INT16", "INT32", "INT64", "INT8", "UINT16", "UINT32", "UINT64", "UINT8"),
    "SignedDataType": _dts("INT16", "INT32", "INT64", "INT8"),
    "UnsignedDataType": _dts("UINT16", "UINT32", "UINT64", "UINT8"),
    "FloatingDataType": _dts("DOUBLE", "FLOAT", "FLOAT16"),
    "IndexNumberType": _dts("INT32", "INT64"),
    "UnaryDataType": _dts("COMPLEX128", "COMPLEX64", "DOUBLE", "FLOAT", "FLOAT16", "BF16", "COMPLEX32"),
    "FLOAT": _dts("FLOAT", "FLOAT16", "BF16"),
}
# Spelled in other cases in a few declarations (TensorType::REALNUMBERTYPE()); FLOAT stays exact (bare `float`).
_GROUPS_FOLDED = {k.lower(): v for k, v in GROUPS.items() if k != "FLOAT"}
_WRAPPERS = {"TensorType", "TesnorType"}  # the constructor, and its one misspelling in the file

INPUT_KINDS = {"INPUT": "required", "OPTIONAL_INPUT": "optional", "DYNAMIC_INPUT": "dynamic"}
OUTPUT_KINDS = {"OUTPUT": "required", "DYNAMIC_OUTPUT": "dynamic"}
_ATTR_KINDS = {"ATTR": False, "ATRR": False, "REQUIRED_ATTR": True}  # ATRR: a misspelling in two declarations
_IGNORED = {"OP_END_FACTORY_REG"}
_ATTR_TYPE_ALIASES = {"int": "Int"}


class Port(NamedTuple):
    name: str
    kind: str  # "required", "optional" or "dynamic"
    dtypes: frozenset[str] | None  # None: the declaration names no readable dtype list


class Attr(NamedTuple):
    name: str
    type: str  # as REG_OP spells it: Int, Float, Bool, String, Type, ListInt, ListFloat, Tensor, ...
    default: object  # int, float, bool, str, a dtype name (Type), a tuple (lists), else the raw text
    required: bool


class RegOp(NamedTuple):
    type: str
    inputs: list[Port]
    outputs: list[Port]
    attrs: list[Attr]


def read_dtypes(spec: str, symbols: dict[str, str] | None = None) -> frozenset[str] | None:
    """The dtype set a port or DATATYPE declaration names (`TensorType({DT_FLOAT, DT_INT32})`,
    `TensorType::NumberType()`, `TensorType({BasicType(), DT_BOOL})`, `"T"` with its DATATYPE text in `symbols`),
    or None when it cannot be read."""
    spec = spec.strip()
    symbol = re.fullmatch(r'"(\w+)"', spec)
    if symbol:
        text = (symbols or {}).get(symbol.group(1))
        return None if text is None else read_dtypes(text)
    found: set[str] = set()
    for token in re.findall(r"[A-Za-z_]\w*", spec):
        if token in _WRAPPERS:
            continue
        if token.startswith("DT_"):
            found.add(_GRAPH_IR_NAMES.get(token, token))
        elif token in GROUPS:
            found |= GROUPS[token]
        elif token.lower() in _GROUPS_FOLDED:
            found |= _GROUPS_FOLDED[token.lower()]
        elif token in _BARE_NAMES:
            found.add(_BARE_NAMES[token])
        else:
            return None
    return frozenset(found) or None


def read_default(attr_type: str, text: str) -> object:
    """An attribute default as a Python value; the text itself when it is not one this reader knows."""
    text = text.strip()
    try:
        if attr_type == "Bool" and text.lower() in ("true", "false", "0", "1"):  # Empty's init is `Bool, 0`
            return text.lower() in ("true", "1")
        if attr_type == "Int" and text.startswith("DT_") and _GRAPH_IR_NAMES.get(text) in BY_NAME:
            return BY_NAME[_GRAPH_IR_NAMES[text]].ge  # an Int holding a ge::DataType (Shape's dtype, DT_INT32 = 3)
        if attr_type == "Int":
            return int(text)
        if attr_type == "Float":
            return float(text.rstrip("fF"))
        if attr_type == "String" and len(text) >= 2 and text[0] == text[-1] == '"':
            return text[1:-1]
        if attr_type == "Type" and text.startswith("DT_"):
            return _GRAPH_IR_NAMES.get(text, text)
        if attr_type in ("ListInt", "ListFloat") and text.startswith("{") and text.endswith("}"):
            items = [t for t in text[1:-1].split(",") if t.strip()]
            return tuple(int(t) if attr_type == "ListInt" else float(t.strip().rstrip("fF")) for t in items)
    except ValueError:
        pass
    return text


def _directive(op: str, line: str) -> tuple[str, str]:
    match = re.fullmatch(r"\s*\.(\w+)\((.*)", line.rstrip())
    if not match:
        raise ValueError(f"REG_OP({op}): cannot read the line {line.strip()[:120]!r}")
    body = match.group(2)
    # The directive's closing parenthesis (one declaration in the file lacks it).
    return match.group(1), body[:-1] if body.endswith(")") and body.count(")") > body.count("(") else body


def _finish(op: str, ports: list[tuple[str, str, str, str]], attrs: list[Attr], symbols: dict[str, str]) -> RegOp:
    inputs = [Port(n, k, read_dtypes(s, symbols)) for d, n, k, s in ports if d == "in"]
    outputs = [Port(n, k, read_dtypes(s, symbols)) for d, n, k, s in ports if d == "out"]
    return RegOp(op, inputs, outputs, attrs)


def parse(text: str) -> dict[str, RegOp]:
    """{op type: RegOp} from the file's text; inputs, outputs and attrs each in declaration order."""
    ops: dict[str, RegOp] = {}
    current: str | None = None
    ports: list[tuple[str, str, str, str]] = []
    attrs: list[Attr] = []
    symbols: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        header = re.fullmatch(r"REG_OP\((\w+)\)\s*", line)
        if header or not line.strip():
            if current is not None:
                ops[current] = _finish(current, ports, attrs, symbols)
            current, ports, attrs, symbols = (header.group(1) if header else None), [], [], {}
            if header and header.group(1) in ops:
                raise ValueError(f"REG_OP({header.group(1)}) is declared twice")
            continue
        if current is None:
            continue  # the file's prose
        directive, body = _directive(current, line)
        name, _, rest = (part.strip() for part in body.partition(","))
        if directive in INPUT_KINDS:
            ports.append(("in", name, INPUT_KINDS[directive], rest))
        elif directive in OUTPUT_KINDS:
            ports.append(("out", name, OUTPUT_KINDS[directive], rest))
        elif directive in _ATTR_KINDS:
            attr_type, _, default = (part.strip() for part in rest.partition(","))
            attr_type = _ATTR_TYPE_ALIASES.get(attr_type, attr_type)
            attrs.append(Attr(name, attr_type, read_default(attr_type, default) if default else None,
                              _ATTR_KINDS[directive]))
        elif directive == "DATATYPE":
            symbols[name] = rest
        elif directive not in _IGNORED:
            raise ValueError(f"REG_OP({current}): unknown declaration .{directive} in {line.strip()[:120]!r}")
    return ops


def load(path: Path | None = None) -> dict[str, RegOp]:
    """The REG_OP declarations of the file at `path` (default: the repository's REG_OPS_FILE)."""
    return parse((path or REG_OPS_FILE).read_text(encoding="utf-8"))
