"""Reads GE graphs from .air (binary ge.proto.ModelDef) and .pbtxt (text format) files, or bytes, into
from_model_def (graph_ir/files/load.py, which trusts nothing in them): a fault of the file itself (not a ModelDef,
not UTF-8 text, nesting too deep for the recursive text parser) is a GraphError naming the file where there is one."""

from __future__ import annotations

from google.protobuf import message, text_format

from graph_ir import proto
from graph_ir.files.load import from_model_def
from graph_ir.ir.errors import GraphError
from graph_ir.ir.graph import Graph

MAX_TEXT_NESTING = 64  # a ModelDef nests 5 deep; deeper text is refused before the (recursive) text parser runs


def _check_nesting(text: str) -> None:
    depth = 0
    quote = None
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "{<":
            depth += 1
            if depth > MAX_TEXT_NESTING:
                raise GraphError(f"the text ModelDef nests deeper than {MAX_TEXT_NESTING} levels")
        elif ch in "}>":
            depth -= 1


def loads(data: bytes) -> Graph:
    """A Graph from a serialized binary ModelDef (the contents of an .air file)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"graph_ir.loads takes bytes, got {type(data).__name__}")
    return from_model_def(_binary(bytes(data)))


def _binary(data: bytes, path: str | None = None) -> proto.ModelDef:
    """The ModelDef of an .air's bytes; a fault names the file, hinting at the usual cause (text named .air)."""
    model = proto.ModelDef()
    try:
        model.ParseFromString(data)
    except (message.DecodeError, RecursionError, ValueError) as e:
        raise GraphError(f"not a valid binary ge.proto.ModelDef: {e}" if path is None else f"graph file {path!r} is "
                         f"not a valid binary ge.proto.ModelDef ({e}); a text-format graph should be named .pbtxt") \
            from None
    return model


def loads_text(text: str) -> Graph:
    """A Graph from a ModelDef in protobuf text format (the contents of a .pbtxt file)."""
    _check_nesting(text)
    model = proto.ModelDef()
    try:
        text_format.Parse(text, model)
    except (text_format.ParseError, RecursionError, ValueError) as e:
        raise GraphError(f"not a valid text ge.proto.ModelDef: {e}") from None
    return from_model_def(model)


def load(path: str) -> Graph:
    """Reads a Graph from an .air (binary ge.proto.ModelDef) or .pbtxt (text format) file."""
    if not isinstance(path, str):
        path = str(path)
    if path.endswith(".pbtxt"):
        with open(path, "rb") as f:
            raw = f.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise GraphError(f"graph file {path!r} is not UTF-8 text: {e}") from None
        return loads_text(text)
    if path.endswith(".air"):
        with open(path, "rb") as f:
            return from_model_def(_binary(f.read(), path))
    raise ValueError(f"graph file {path!r}: use a .air (binary ModelDef) or .pbtxt (text format) name")
