"""What the family lowerings share: TF attributes read off a NodeDef, and the lowering of a TF op that maps onto one
GE op with its inputs by position (AutoMapping, as Ascend's TF adapter does it)."""

from __future__ import annotations

from collections.abc import Callable

from graph_ir.dtypes import from_tf
from graph_ir.lowering.capture import attr_value


def tf_attr(node, name: str, default=None):
    """A TF attribute's value (lists as Python lists, dtypes as graph_ir DTypes, strings decoded)."""
    if name not in node.attr:
        return default
    value = node.attr[name]
    kind = value.WhichOneof("value")
    if kind == "list":
        for field in ("i", "f", "s", "b"):
            items = list(getattr(value.list, field))
            if items:
                return [v.decode() if isinstance(v, bytes) else v for v in items]
        return []
    if kind == "type":
        return from_tf(value.type)
    raw = attr_value(node, name)
    return raw.decode() if isinstance(raw, bytes) else raw


def maps_to(ge_type: str) -> Callable[[Callable], Callable]:
    """Marks a lowering with the GE op type it builds (what the README's lowering table names)."""

    def mark(lower: Callable) -> Callable:
        lower.ge_type = ge_type
        return lower

    return mark


def same(ge_type: str, **attrs: Callable | str) -> Callable:
    """The lowering onto GE op `ge_type`, inputs by position; each GE attribute is the named TF attribute (a str)
    or computed from the NodeDef (a callable)."""

    @maps_to(ge_type)
    def lower(ctx, node, inputs):
        values = {k: (tf_attr(node, v) if isinstance(v, str) else v(node)) for k, v in attrs.items()}
        return ctx.add(ge_type, inputs, values)

    return lower


def count(node) -> int:
    """A list input's length: TF's N attribute."""
    return int(tf_attr(node, "N"))
