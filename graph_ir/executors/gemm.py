"""Matrix products for the executors, on the fastest BLAS the process can load.

Intel's oneMKL (the `mkl` wheel from PyPI, loaded here through its `libmkl_rt`) runs the convolutions' float32
products at 142-161 GFLOP/s a core on this project's Xeon, where the OpenBLAS bundled with NumPy's wheels runs
123-138: 1.10-1.19x (python -m bench.bench_gemm). The convolutions are im2col plus such products, so this is most
of a CNN step. MKL is loaded with its sequential threading layer: the executors split products over their own threads
(graph_ir/executors/threads.py), and MKL's OpenMP or TBB pools never start.

Without the wheel, or with GRAPH_IR_GEMM=numpy in the environment, every product is NumPy's `np.matmul`. So is any
product MKL's CBLAS cannot take as it lies: other dtypes, a negative or non-unit inner stride, dimensions past
32 bits, or an empty one. Both are float32 (float64) products with their own summation order; a split of the rows
or columns into parts of two or more never changes an element's result (tests/graph_ir/test_gemm.py).
"""

from __future__ import annotations

import ctypes
import glob
import importlib.metadata
import os
import sys

import numpy as np

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112  # CBLAS's enums (mkl_cblas.h)
_SEQUENTIAL = 1  # MKL_THREADING_SEQUENTIAL (mkl_service.h)
_INT_MAX = 2**31 - 1  # MKL's LP64 interface: 32-bit dimensions


def _library_paths() -> list[str]:
    """Where the `mkl` wheel put libmkl_rt: from its installed file list, else the environment's lib folder."""
    try:
        files = importlib.metadata.distribution("mkl").files or []
        found = [str(f.locate()) for f in files if os.path.basename(str(f)).startswith("libmkl_rt.so")]
    except importlib.metadata.PackageNotFoundError:
        found = []
    return found + sorted(glob.glob(os.path.join(sys.prefix, "lib", "libmkl_rt.so*")))


def _load() -> tuple[object, object, str] | None:
    """(cblas_sgemm, cblas_dgemm, MKL's version) or None (no wheel, or GRAPH_IR_GEMM=numpy)."""
    if os.environ.get("GRAPH_IR_GEMM", "").lower() == "numpy" or not sys.platform.startswith("linux"):
        return None
    for path in _library_paths():
        try:
            lib = ctypes.CDLL(path)
            lib.MKL_Set_Threading_Layer.argtypes = [ctypes.c_int]
            lib.MKL_Set_Threading_Layer(_SEQUENTIAL)  # before any other call into MKL
            version = ctypes.create_string_buffer(256)
            lib.MKL_Get_Version_String(version, len(version))
        except (OSError, AttributeError):
            continue
        functions = []
        for name, scalar in (("cblas_sgemm", ctypes.c_float), ("cblas_dgemm", ctypes.c_double)):
            fn = getattr(lib, name)
            fn.argtypes = [ctypes.c_int] * 6 + [scalar, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                                 scalar, ctypes.c_void_p, ctypes.c_int]
            fn.restype = None
            functions.append(fn)
        return functions[0], functions[1], version.value.decode(errors="replace")
    return None


_MKL = _load()
_GEMMS = {} if _MKL is None else {np.dtype(np.float32): _MKL[0], np.dtype(np.float64): _MKL[1]}


def backend() -> str:
    """'mkl <version>' when products run on oneMKL, else 'numpy'."""
    return "numpy" if _MKL is None else f"mkl {_MKL[2]}"


def _operand(a: np.ndarray) -> tuple[int, int] | None:
    """(CBLAS transpose flag, leading dimension) of a 2-D operand as it lies in memory, or None when CBLAS cannot
    read it in place (a row or column stride that is not one element, or a leading dimension too small or large)."""
    item = a.itemsize
    rows, cols = a.shape
    s0, s1 = a.strides
    if (s1 == item or cols == 1) and s0 % item == 0 and max(cols, 1) <= s0 // item <= _INT_MAX:
        return _NO_TRANS, s0 // item
    if (s0 == item or rows == 1) and s1 % item == 0 and max(rows, 1) <= s1 // item <= _INT_MAX:
        return _TRANS, s1 // item
    if rows == 1 and s1 == item:
        return _NO_TRANS, max(cols, 1)
    if cols == 1 and s0 == item:
        return _TRANS, max(rows, 1)
    return None


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None, accumulate: bool = False) -> np.ndarray:
    """out [M, N] = a [M, K] @ b [K, N] (2-D; out is made when not given), each element a float32 (float64) dot
    product over K: oneMKL's gemm when it can read a, b and out as they lie, else `np.matmul`. accumulate: out +=
    a @ b instead (gemm's beta = 1; out must be given)."""
    dtype = np.result_type(a, b)
    if accumulate and out is None:
        raise ValueError("gemm.matmul: accumulate=True needs out")
    if out is None:
        out = np.empty((a.shape[0], b.shape[1]), dtype)
    gemm = _GEMMS.get(dtype)
    m, k = a.shape
    n = b.shape[1]
    if gemm is None or a.dtype != dtype or b.dtype != dtype or out.dtype != dtype or min(m, n, k) == 0 or \
            max(m, n, k) > _INT_MAX or not (a.flags.aligned and b.flags.aligned and out.flags.aligned) or \
            np.may_share_memory(out, a) or np.may_share_memory(out, b):
        return _numpy(a, b, out, accumulate)
    left, right = _operand(a), _operand(b)
    item = out.itemsize
    if left is None or right is None or not (out.strides[1] == item or n == 1) or out.strides[0] % item or \
            not max(n, 1) <= out.strides[0] // item <= _INT_MAX:
        return _numpy(a, b, out, accumulate)
    scalar = ctypes.c_float if dtype == np.float32 else ctypes.c_double
    gemm(_ROW_MAJOR, left[0], right[0], m, n, k, scalar(1.0), a.ctypes.data, left[1], b.ctypes.data, right[1],
         scalar(1.0 if accumulate else 0.0), out.ctypes.data, out.strides[0] // item)
    return out


def _numpy(a: np.ndarray, b: np.ndarray, out: np.ndarray, accumulate: bool) -> np.ndarray:
    if accumulate:
        out += np.matmul(a, b)
        return out
    return np.matmul(a, b, out=out)
