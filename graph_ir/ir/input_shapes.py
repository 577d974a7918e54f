"""ATC's --input_shape ("name:d0,d1;name2:d0", -1 for a dim known only at run time) or a mapping of names to shapes,
parsed and checked without TensorFlow: the lowering (graph_ir.from_saved_model, from_tensorflow) and the command line
(which checks it before TensorFlow is imported) share it."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from graph_ir.ir.errors import LoweringError

_DIMS = re.compile(r"^-?\d+(,-?\d+)*$|^$")


def parse_input_shapes(given: str | Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """{argument name: shape} from ATC's "name:d0,d1;name2:d0" (an empty shape after the colon: a scalar) or from
    a mapping of names to sequences of ints. Raises LoweringError naming the piece that is not a shape."""
    if isinstance(given, Mapping):
        items = list(given.items())
    elif isinstance(given, str):
        items = []
        for piece in filter(None, (p.strip() for p in given.split(";"))):
            name, colon, dims = piece.rpartition(":")
            if not colon or not name or not _DIMS.match(dims.replace(" ", "")):
                raise LoweringError(f"input shape {piece!r} is not name:d0,d1,... (dims >= 0, or -1 for a dim "
                                    "known only at run time, as ATC's --input_shape writes them, e.g. "
                                    "\"x:-1,224,224,3;y:-1\")")
            items.append((name, dims.replace(" ", "")))
    else:
        raise LoweringError(f"input_shapes must be a str (\"x:8,12;y:8\") or a mapping of names to shapes, got "
                            f"{type(given).__name__}")
    shapes = {}
    for name, dims in items:
        values = _dims(dims)
        if not isinstance(name, str) or values is None or \
                not all(isinstance(d, int) and not isinstance(d, bool) and d >= -1 for d in values):
            raise LoweringError(f"input shape of {name!r} is {dims!r:.80}; expected dims >= 0, or -1 for a dim known "
                                "only at run time, as a sequence of ints or a string \"d0,d1,...\"")
        if name in shapes:
            raise LoweringError(f"input shape of {name!r} is given twice")
        shapes[name] = tuple(None if d == -1 else d for d in values)  # TF's unknown dim
    return shapes


def _dims(dims: Any) -> list[Any] | None:
    """The dims of one shape given as "d0,d1,..." or as a sequence; None if it is neither (None, 5, "abc")."""
    if isinstance(dims, str):
        text = dims.replace(" ", "")
        return [int(d) for d in text.split(",")] if text and _DIMS.match(text) else [] if not text else None
    return list(dims) if isinstance(dims, Iterable) and not isinstance(dims, (bytes, Mapping)) else None
