"""Subnormal floats flushed to zero during a run, as TF's CPU kernels flush them: TF runs its ops with the x86
MXCSR's FTZ (flush-to-zero: a subnormal result is +-0) and DAZ (denormals-are-zero: a subnormal input reads as +-0)
bits set (tensorflow/core/platform/denormal.h, ScopedFlushDenormal, set in its thread pools). graph_ir.Session sets
the same two bits on the thread that runs the graph and on its executor threads (graph_ir/executors/threads.py) for
the run (the C++ kernels' workers take the calling thread's MXCSR with each task: graph_ir/cc/worker_pool.h), and
restores the caller's state after it, so NumPy's float32 and float64 arithmetic (and the C++ kernels)
give TF's zeros: Mul(1e-20, 1e-19) and 1e-39 + 0 are 0 in float32, as in TF. Operations that move bits without
arithmetic (copies, Neg as a sign flip, Abs) keep subnormals in both. float16 and bfloat16 results rounded from
float32 are not flushed (their subnormals are normal float32 values), as in TF.

MXCSR is set through glibc's fegetenv/fesetenv (its x86-64 fenv_t holds MXCSR at byte 28); on another C library or
machine nothing is changed (`supported()` is False) and subnormals stay as NumPy computes them."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import platform
import struct
from collections.abc import Iterator

_FTZ_DAZ = 0x8040  # MXCSR bit 15 (FTZ) and bit 6 (DAZ)
_MXCSR_OFFSET = 28  # in glibc's x86-64 fenv_t (bits/fenv.h), 32 bytes long
_ENV_BYTES = 32
_LIBM: list = []


def _libm():
    if not _LIBM:
        lib = None
        if platform.machine() in ("x86_64", "AMD64") and platform.system() == "Linux":
            try:
                lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
                lib.fegetenv.argtypes = lib.fesetenv.argtypes = [ctypes.c_char_p]
            except (OSError, AttributeError):
                lib = None
        _LIBM.append(lib)
    return _LIBM[0]


def supported() -> bool:
    """Whether this process can set FTZ and DAZ (glibc on x86-64)."""
    return _libm() is not None


def set_flush() -> None:
    """Sets FTZ and DAZ on the calling thread, for good (the executor threads)."""
    lib = _libm()
    if lib is not None:
        env = ctypes.create_string_buffer(_ENV_BYTES)
        if lib.fegetenv(env) == 0:
            mxcsr = struct.unpack_from("<I", env.raw, _MXCSR_OFFSET)[0]
            struct.pack_into("<I", env, _MXCSR_OFFSET, mxcsr | _FTZ_DAZ)
            lib.fesetenv(env)


@contextlib.contextmanager
def flushed() -> Iterator[None]:
    """FTZ and DAZ on the calling thread inside the block; its floating-point state as it was after it."""
    lib = _libm()
    saved = ctypes.create_string_buffer(_ENV_BYTES)
    if lib is None or lib.fegetenv(saved) != 0:
        yield
        return
    set_flush()
    try:
        yield
    finally:
        lib.fesetenv(saved)
