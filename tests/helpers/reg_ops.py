"""A reader of CANN's REG_OP declarations as ../shared/research/ge_reg_ops.md keeps them (taken from torchair's
generated builders), for checking graph_ir's registry against them: inputs and outputs in declaration order with
their kinds and dtypes, attributes with their types and defaults."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from tests.helpers import ROOT

# CANN's TensorType groups (metadef types.h; ../shared/research/ge_standard_ops.md §0), as graph_ir dtype names.
_FLOATS = ["float64", "float32", "float16", "bfloat16"]
_INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
_REAL = [*_FLOATS, *_INTS]
GROUPS = {
    "ALL": [*_REAL, "bool", "complex64", "complex128", "qint8", "qint16", "qint32", "quint8", "quint16", "resource",
            "string", "complex32"],
    "BasicType": [*_REAL, "complex64", "complex128", "qint8", "qint16", "qint32", "quint8", "quint16", "complex32"],
    "NumberType": [*_REAL, "complex64", "complex128", "qint8", "qint32", "quint8", "complex32"],
    "RealNumberType": _REAL,
    "REALNUMBERTYPE": _REAL,
    "UnaryDataType": [*_FLOATS, "complex64", "complex128", "complex32"],
    "FloatingDataType": ["float64", "float32", "float16"],
    "IndexNumberType": ["int32", "int64"],
    "IntegerDataType": _INTS,
}
_DT = {"FLOAT": "float32", "FLOAT32": "float32", "FLOAT16": "float16", "BF16": "bfloat16", "DOUBLE": "float64",
       "BOOL": "bool", "DI_UINT16": "uint16"}
_LINE = re.compile(r"^\s*\.(INPUT|OPTIONAL_INPUT|DYNAMIC_INPUT|OUTPUT|DYNAMIC_OUTPUT|ATTR|REQUIRED_ATTR)\((.*)\)\s*$")


@dataclass
class RegOp:
    name: str
    inputs: list[tuple[str, str, frozenset[str] | None]] = field(default_factory=list)  # (name, kind, dtypes)
    outputs: list[tuple[str, str, frozenset[str] | None]] = field(default_factory=list)
    attrs: list[tuple[str, str, str | None, bool]] = field(default_factory=list)  # (name, type, default, required)


def _dtypes(text: str) -> frozenset[str] | None:
    """The dtypes of a TensorType(...) declaration; None for a type symbol ("T1") whose dtypes the list omits."""
    if re.fullmatch(r'\s*"\w+"\s*', text):
        return None
    out: set[str] = set()
    for group in re.findall(r"TensorType::(\w+)\(\)|(\w+)\(\)", text):
        name = group[0] or group[1]
        out.update(GROUPS.get(name, []))
    for token in re.findall(r"\bDT_(\w+)|\b(int8|int32|float16|float32|bool)\b", text):
        raw = token[0] or token[1]
        out.add(_DT.get(raw.upper(), raw.lower()) if token[0] else raw)
    for name in re.findall(r"[({,]\s*(\w+)\s*(?=[,})])", text):  # TensorType({UnaryDataType, int32})
        out.update(GROUPS.get(name, []))
    return frozenset(out)


def parse(text: str) -> dict[str, RegOp]:
    """{op type: RegOp} of every REG_OP(...) block of the text."""
    ops: dict[str, RegOp] = {}
    current: RegOp | None = None
    for line in text.splitlines():
        head = re.match(r"^REG_OP\((\w+)\)", line)
        if head:
            current = ops.setdefault(head.group(1), RegOp(head.group(1)))
            continue
        m = _LINE.match(line)
        if current is None or not m:
            if not line.strip():
                current = None
            continue
        kind, body = m.groups()
        name, _, rest = body.partition(",")
        name = name.strip()
        if kind in ("ATTR", "REQUIRED_ATTR"):
            attr_type, _, default = rest.strip().partition(",")
            current.attrs.append((name, attr_type.strip(), default.strip() or None, kind == "REQUIRED_ATTR"))
        elif kind.endswith("OUTPUT"):
            current.outputs.append((name, "dynamic" if kind.startswith("DYNAMIC") else "required", _dtypes(rest)))
        else:
            current.inputs.append((name, {"INPUT": "required", "OPTIONAL_INPUT": "optional",
                                          "DYNAMIC_INPUT": "dynamic"}[kind], _dtypes(rest)))
    return ops


def reg_ops_path() -> str:
    """GE_REG_OPS if set, else shared/research/ge_reg_ops.md beside the repository (where CI puts shared/)."""
    return os.environ.get("GE_REG_OPS") or os.path.join(os.path.dirname(ROOT), "shared", "research", "ge_reg_ops.md")


def load() -> dict[str, RegOp]:
    path = reg_ops_path()
    if not os.path.exists(path):
        raise FileNotFoundError(f"CANN's REG_OP declarations are not at {path}: set GE_REG_OPS to the path of "
                                "shared/research/ge_reg_ops.md")
    with open(path) as f:
        return parse(f.read())
