"""What the family lowerings share: TF attributes read off a NodeDef, and the lowering of a TF op that maps onto one
GE op with its inputs by position (AutoMapping, as Ascend's TF adapter does it)."""

from __future__ import annotations

from collections.abc import Callable

from graph_ir.ir.dtypes import from_tf
from graph_ir.ir.nodes import Handle, Node
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
    """Marks a lowering with the GE op type it builds (what docs/lowering.md's lowering table names)."""

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


def same_bool_as_bytes(ge_type: str, data: tuple[int, ...] = (0,), **attrs: Callable | str) -> Callable:
    """`same(ge_type, **attrs)` for a GE op whose REG_OP takes no bool at the data inputs `data` (BasicType:
    StridedSlice, Slice, Transpose, GatherV2, Tile, SelectV2's then/else) though TF's kernel moves bool tensors
    (masks): bool inputs go through the op as uint8 between Casts, which is exact (the op only moves elements; a
    bool is one byte, 0 or 1, and Cast maps it to uint8 0/1 and back)."""
    plain = same(ge_type, **attrs)

    @maps_to(ge_type)
    def lower(ctx, node, inputs):
        if not any(k < len(inputs) and inputs[k].dtype.name == "bool" for k in data):
            return plain(ctx, node, inputs)
        values = {k: (tf_attr(node, v) if isinstance(v, str) else v(node)) for k, v in attrs.items()}
        as_bytes = [first(ctx.add("Cast", [h], {"dst_type": "uint8"}, suffix=f"uint8_{k}"))
                    if k in data and h.dtype.name == "bool" else h for k, h in enumerate(inputs)]
        moved = first(ctx.add(ge_type, as_bytes, values, suffix="bytes"))
        return ctx.add("Cast", [moved], {"dst_type": "bool"})

    return lower


def first(result) -> Handle:
    """The first output of what ctx.add returned (a node, or the Consts it was folded into)."""
    return result.output(0) if isinstance(result, Node) else result[0]


def count(node) -> int:
    """A list input's length: TF's N attribute."""
    return int(tf_attr(node, "N"))
