"""Aliasing that np.shares_memory cannot see: two mappings of one file (np.memmap, mmap) at different addresses.

Arrays whose memory comes from an ordinary allocation are left alone (fast path). When any array's base chain
reaches something else (an mmap, a memmap, a foreign buffer), each array's address range is looked up in
/proc/self/maps (Linux): two ranges backed by overlapping offsets of one file alias each other.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

_PLAIN_OWNERS = (bytes, bytearray, type(None))


def _ordinary(a: np.ndarray) -> bool:
    """True when the array's memory is NumPy's own (or a bytes object's), not a mapping or a foreign buffer."""
    base: Any = a
    while isinstance(base, np.ndarray):
        if isinstance(base, np.memmap):
            return False
        base = base.base
    return isinstance(base, _PLAIN_OWNERS)


def _file_ranges(address: int, size: int, maps: list[tuple]) -> list[tuple[tuple, int, int, bool]]:
    """(file key, first byte, end byte, shared mapping) of the file-backed pages under [address, address + size)."""
    out = []
    for start, end, offset, device, inode, shared in maps:
        if inode == 0 or end <= address or start >= address + size:
            continue
        lo, hi = max(start, address), min(end, address + size)
        out.append(((device, inode), offset + lo - start, offset + hi - start, shared))
    return out


def _read_maps() -> list[tuple]:
    maps = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) < 5:
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            maps.append((start, end, int(fields[2], 16), fields[3], int(fields[4]), fields[1].endswith("s")))
    return maps


def check_no_file_aliasing(op: str, arrays: dict[str, np.ndarray], written: tuple[str, ...]) -> None:
    """Raises ValueError when an updated array, through a shared mapping (whose writes other mappings of the file
    see), covers bytes of one file that another array maps too. Private (copy-on-write) mappings write their own
    copy, so only shared ones can alias."""
    if all(_ordinary(a) for a in arrays.values()) or not os.path.exists("/proc/self/maps"):
        return
    maps = _read_maps()
    ranges = {name: _file_ranges(a.__array_interface__["data"][0], a.nbytes, maps)
              for name, a in arrays.items() if a.size}
    names = list(ranges)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            if first not in written and second not in written:
                continue
            for key_a, lo_a, hi_a, shared_a in ranges[first]:
                for key_b, lo_b, hi_b, shared_b in ranges[second]:
                    writes_through = (shared_a and first in written) or (shared_b and second in written)
                    if writes_through and key_a == key_b and lo_a < hi_b and lo_b < hi_a:
                        raise ValueError(f"{op}: {first} and {second} map the same bytes of one file; each updated "
                                         "array needs its own buffer")


__all__ = ["check_no_file_aliasing"]
