"""The thread count of NumPy's BLAS (the OpenBLAS that NumPy's wheels bundle) while a Session runs.

OpenBLAS's worker threads busy-wait for their next job. When the machine has no idle core (a shared 2-vCPU VM
running other work, or TF's own thread pool in the same process), a matrix product split over threads waits for
descheduled workers: measured here, 64x784 @ 784x256 took 0.2 ms on one thread and 24-76 ms on two, and even
512x4608 @ 4608x512 was 5x slower on two. So a run uses one BLAS thread by default (graph_ir.Session(blas_threads=)
says otherwise), and the process's setting is restored after the run. Without a bundled OpenBLAS (another NumPy
build) the count is left as it is.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import threading
from collections.abc import Iterator

import numpy as np

_LOCK = threading.Lock()
_STATE = {"depth": 0, "before": None}  # blocks open now, and the count to restore when the last one closes


def _load() -> tuple[object, object] | None:
    """(set_num_threads, get_num_threads) of the OpenBLAS bundled beside NumPy, or None."""
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "libscipy_openblas*.so*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_openblas", "openblas"):
            for suffix in ("64_", ""):
                setter = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
                getter = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                if setter is not None and getter is not None:
                    setter.argtypes, getter.restype = [ctypes.c_int], ctypes.c_int
                    return setter, getter
    return None


_FUNCTIONS = _load()


@contextlib.contextmanager
def blas_threads(count: int | None) -> Iterator[None]:
    """NumPy's BLAS on `count` threads inside the block (None: as the process has it); blocks open at once (nested, or
    in several threads) keep the first one's count until the last one closes."""
    if count is None or _FUNCTIONS is None:
        yield
        return
    setter, getter = _FUNCTIONS
    with _LOCK:
        if _STATE["depth"] == 0:
            _STATE["before"] = getter()
            if _STATE["before"] != count:
                setter(count)
        _STATE["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0:
                setter(_STATE["before"])
