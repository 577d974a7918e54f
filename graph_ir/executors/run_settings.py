"""How a graph_ir.Session's runs use the machine: NumPy's BLAS threads (graph_ir/executors/blas.py), the executors'
threads (graph_ir/executors/threads.py), subnormals flushed as TF flushes them (graph_ir/executors/denormals.py),
and whether freed large buffers stay with the process for the next run.

glibc's malloc gives every block above its mmap threshold (at most 32 MiB, adjusted as blocks are freed) fresh pages
from the kernel, faulted in and zeroed on first touch, and hands them back when freed; it also trims freed memory at
the top of its heap. A training step allocates the same large buffers every run (VGG16's 64 MB weight gradients,
im2col chunks, activations), so each run paid for 170 MiB of fresh pages, 10-20% of a VGG16 or ResNet50 step. With
`keep_memory` (the default) the first run raises both thresholds (mallopt M_MMAP_THRESHOLD and M_TRIM_THRESHOLD, for
the whole process), so freed buffers are reused as TF's own allocator reuses its tensors: the process keeps up to a
run's peak (which add_graph bounds) after it, instead of returning it to the system.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
from collections.abc import Iterator

from graph_ir.executors import denormals
from graph_ir.executors import threads as executor_threads
from graph_ir.executors.blas import blas_threads
from graph_ir.ir.verify import is_int

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_KEPT: list[bool] = []  # whether the thresholds were raised in this process (once)


def check(max_run_bytes: int | None, blas: int | None, threads: int | None, keep_memory: bool) -> None:
    """Refuses settings Session cannot use, naming the argument."""
    if max_run_bytes is not None and (not is_int(max_run_bytes) or max_run_bytes < 0):
        raise TypeError(f"max_run_bytes must be an int >= 0 or None, got {max_run_bytes!r}")
    for name, value in (("blas_threads", blas), ("threads", threads)):
        if value is not None and (not is_int(value) or value < 1):
            raise TypeError(f"{name} must be an int >= 1 or None, got {value!r}")
    if not isinstance(keep_memory, bool):
        raise TypeError(f"keep_memory must be a bool, got {keep_memory!r}")


def keep_freed_memory() -> bool:
    """Raises glibc's mmap and trim thresholds once per process (see the module docstring); False where the C
    library is not glibc or refuses."""
    if not _KEPT:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
        except (OSError, AttributeError):
            _KEPT.append(False)
            return False
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        _KEPT.append(bool(mallopt(_M_MMAP_THRESHOLD, 1 << 30)) and bool(mallopt(_M_TRIM_THRESHOLD, (1 << 31) - 1)))
    return _KEPT[0]


def release_below(peak: int, largest: int) -> int:
    """After a run that held `peak` bytes, where earlier runs of the graph held up to `largest`: gives freed memory
    back to the system (glibc's malloc_trim) when this run needed under half of it, so that a small batch after a
    large one does not keep the large one's pages. Returns the new largest peak to compare the next run with."""
    if peak * 2 >= largest:
        return max(peak, largest)
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: its allocator keeps what it keeps
    return peak


@contextlib.contextmanager
def applied(blas: int | None, threads: int | None, keep_memory: bool) -> Iterator[None]:
    """The settings, for one run."""
    if keep_memory:
        keep_freed_memory()
    with blas_threads(blas), executor_threads.using(threads), denormals.flushed():
        yield
