"""The machine's practical bandwidth limit for an optimizer step: a vectorized read-modify-write copy with the same
streams as the kernel (bench/rmw_copy.cc, compiled here with g++ -O3 -march=native and called through ctypes).

The page size of the copy's buffers matters as much as the code: NumPy asks for transparent huge pages (2 MB) on
arrays of 4 MB and more, while TensorFlow's CPU allocator hands out tensors on 4 KB pages (with THP in "madvise"
mode, the usual default) unless glibc's malloc is told to advise huge pages (GLIBC_TUNABLES=glibc.malloc.hugetlb=1).
On 4 KB pages the same copy streams 7-21% slower here (bench/NOTES.md, issue 29), so a kernel on TF's tensors is
compared with both: the copy on NumPy's 2 MB pages and on 4 KB pages."""

from __future__ import annotations

import ctypes
import mmap
import os
import subprocess
import tempfile
import time

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
_LIB = None


def _library() -> ctypes.CDLL:
    global _LIB
    if _LIB is None:
        out = os.path.join(tempfile.mkdtemp(prefix="tfp_rmw_"), "rmw_copy.so")
        flags = ["-O3", "-march=native", "-shared", "-fPIC", "-pthread", "-std=c++17"]
        subprocess.run(["g++", *flags, os.path.join(_HERE, "rmw_copy.cc"), "-o", out], check=True)
        _LIB = ctypes.CDLL(out)
        _LIB.rmw_copy.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_int64, ctypes.c_int,
                                  ctypes.c_int]
    return _LIB


_MADV_NOHUGEPAGE = 15  # linux/mman.h


def _aligned_ones(size: int, dtype, huge_pages: bool = True) -> np.ndarray:
    """64-byte aligned, as TensorFlow's allocator aligns tensors. With huge_pages=False the buffer is kept on 4 KB
    pages (madvise(MADV_NOHUGEPAGE) before its first touch), as TF's tensors are; otherwise NumPy's own advice
    applies (2 MB pages for 4 MB and more, where the kernel's THP mode allows)."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.empty(size + 64 // itemsize, dtype)
    if not huge_pages and raw.nbytes >= mmap.PAGESIZE:
        start = raw.ctypes.data // mmap.PAGESIZE * mmap.PAGESIZE
        length = raw.ctypes.data + raw.nbytes - start
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        if libc.madvise(start, length, _MADV_NOHUGEPAGE) != 0:
            raise OSError(ctypes.get_errno(), "madvise(MADV_NOHUGEPAGE) failed")
    raw.fill(1)
    offset = (-raw.ctypes.data % 64) // itemsize
    return raw[offset:offset + size]


def huge_page_kb(arrays: list[np.ndarray] | None = None) -> int:
    """kB of the arrays' memory (of the whole process with None) on transparent huge pages (AnonHugePages in
    /proc/self/smaps; 0 where unreadable)."""
    spans = [(0, 1 << 64)] if arrays is None else [(a.ctypes.data, a.ctypes.data + a.nbytes) for a in arrays]
    total, inside = 0, False
    try:
        with open("/proc/self/smaps") as f:
            for line in f:
                head = line.split(maxsplit=1)[0]
                if "-" in head and not head.endswith(":"):
                    lo, hi = (int(x, 16) for x in head.split("-"))
                    inside = any(lo < end and hi > begin for begin, end in spans)
                elif inside and head == "AnonHugePages:":
                    total += int(line.split()[1])
    except OSError:
        return 0
    return total


class RmwCopy:
    """A callable doing one RMW pass over `writes` state arrays and one read-only array of `size` elements, on 2 MB
    pages where NumPy gets them (huge_pages=True) or on 4 KB pages as TF's tensors are (huge_pages=False)."""

    def __init__(self, size: int, writes: int, element_size: int, threads: int | None = None,
                 huge_pages: bool = True):
        dtype = np.float32 if element_size == 4 else np.uint16
        self.arrays = [_aligned_ones(size, dtype, huge_pages) for _ in range(writes + 1)]
        self.pointers = (ctypes.c_void_p * len(self.arrays))(*[a.ctypes.data for a in self.arrays])
        if threads is None:  # the kernels' cost model: small updates run on one thread (tf_plugin/cc/op_kernels/sharding.h)
            small = size * element_size * (2 * writes + 1) <= 256 * 1024
            threads = 1 if small else os.cpu_count() or 1
        self.args = (self.pointers, writes, size, element_size, threads)
        self.lib = _library()

    def __call__(self) -> None:
        self.lib.rmw_copy(*self.args)


def rmw_ms(size: int, writes: int, element_size: int, repeats: int) -> float:
    """Median milliseconds of the RMW copy (after a warm-up pass that faults the pages in)."""
    fn = RmwCopy(size, writes, element_size)
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))
