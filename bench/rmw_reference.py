"""The machine's practical bandwidth limit for an optimizer step: a vectorized read-modify-write copy with the same
streams as the kernel (bench/rmw_copy.cc, compiled here with g++ -O3 -mavx2 and called through ctypes)."""

from __future__ import annotations

import ctypes
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
        flags = ["-O3", "-shared", "-fPIC", "-pthread", "-std=c++17"]
        if os.uname().machine in ("x86_64", "AMD64"):
            flags.append("-mavx2")
        subprocess.run(["g++", *flags, os.path.join(_HERE, "rmw_copy.cc"), "-o", out], check=True)
        _LIB = ctypes.CDLL(out)
        _LIB.rmw_copy.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_int64, ctypes.c_int,
                                  ctypes.c_int]
    return _LIB


def _aligned_ones(size: int, dtype) -> np.ndarray:
    """64-byte aligned, as TensorFlow's allocator aligns tensors."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.ones(size + 64 // itemsize, dtype)
    offset = (-raw.ctypes.data % 64) // itemsize
    return raw[offset:offset + size]


class RmwCopy:
    """A callable doing one RMW pass over `writes` state arrays and one read-only array of `size` elements."""

    def __init__(self, size: int, writes: int, element_size: int, threads: int | None = None):
        dtype = np.float32 if element_size == 4 else np.uint16
        self.arrays = [_aligned_ones(size, dtype) for _ in range(writes + 1)]
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
