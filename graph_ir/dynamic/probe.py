"""The two sizes a lowering gives the dims it does not know (graph_ir/dynamic/merge.py compares the two graphs).

They are large enough that no real broadcast of 1 hides in them, and have many divisors (48 = 2^4 * 3, 72 = 2^3 *
3^2), so that a step reshaping an unknown dim into heads, pairs or patches lowers at both. Every shape built from them
stays small, so a lowering that sizes an array by a dim allocates little."""

from __future__ import annotations

PROBES = (48, 72)


def valued_size(probe: int) -> int:
    """The size a lowering gives a size known only from values (a Where's count) at probe size `probe`: one more, so
    that it never equals an unknown input dim by chance and the two lowerings still differ in it."""
    return probe + 1
