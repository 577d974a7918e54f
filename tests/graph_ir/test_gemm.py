"""graph_ir/executors/gemm.py: the executors' matrix products on oneMKL (when its wheel is installed) against a
float64 reference and NumPy, for every memory layout CBLAS reads in place and those it cannot."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from graph_ir.executors import gemm, threads

MKL = gemm.backend().startswith("mkl")
EPS = {np.float32: np.finfo(np.float32).eps, np.float64: np.finfo(np.float64).eps}


def _values(rng, shape, dtype):
    """Normals with zeros, negatives and ties mixed in."""
    v = rng.standard_normal(shape).astype(dtype)
    v[rng.random(shape) < 0.1] = 0
    v[rng.random(shape) < 0.05] = 1.5
    return v


def _check_close(got, a, b):
    """Within K * eps * sum |a||b| of the float64 product (a dot product's worst-case rounding)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = a.shape[1] * EPS[got.dtype.type] * (np.abs(a64) @ np.abs(b64)) + 1e-30
    err = np.abs(got.astype(np.float64) - a64 @ b64)
    assert (err <= bound).all(), float((err / bound).max())


def test_the_wheel_is_used_where_it_is_installed():
    if os.environ.get("GRAPH_IR_GEMM", "").lower() == "numpy":
        pytest.skip("GRAPH_IR_GEMM=numpy: NumPy's products by choice")
    try:
        import importlib.metadata
        importlib.metadata.distribution("mkl")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the mkl wheel is not installed: products are NumPy's")
    assert MKL, gemm.backend()
    assert "Math Kernel Library" in gemm.backend()


def test_graph_ir_gemm_numpy_turns_it_off():
    env = {**os.environ, "GRAPH_IR_GEMM": "numpy"}
    out = subprocess.run([sys.executable, "-c", "from graph_ir.executors import gemm; print(gemm.backend())"],
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "numpy"


def _layouts(rng, m, k, n, dtype):
    """(name, a, b): C-ordered operands, transposed views, and views with a leading dimension past their width."""
    a, b = _values(rng, (m, k), dtype), _values(rng, (k, n), dtype)
    wide_a = _values(rng, (m, k + 5), dtype)[:, 2:k + 2]
    wide_b = _values(rng, (k, n + 3), dtype)[:, 1:n + 1]
    yield "row-major", a, b
    yield "a transposed", np.ascontiguousarray(a.T).T, b
    yield "b transposed", a, np.ascontiguousarray(b.T).T
    yield "both transposed", np.ascontiguousarray(a.T).T, np.ascontiguousarray(b.T).T
    yield "strided rows", wide_a, wide_b
    yield "transposed strided", _values(rng, (k, m + 4), dtype)[:, 3:m + 3].T, wide_b


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 7, 5), (5, 7, 1), (3, 1, 4), (17, 33, 9), (257, 130, 66),
                                   (64, 576, 64)])
def test_products_are_within_a_dot_products_rounding_of_float64(dtype, m, k, n):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    for name, a, b in _layouts(rng, m, k, n, dtype):
        got = gemm.matmul(a, b)
        assert got.dtype == dtype and got.shape == (m, n), name
        _check_close(got, a, b)
        into = np.full((m, n + 4), np.nan, dtype)
        gemm.matmul(a, b, out=into[:, 2:n + 2])
        np.testing.assert_array_equal(into[:, 2:n + 2], got, err_msg=name)
        assert np.isnan(into[:, :2]).all() and np.isnan(into[:, n + 2:]).all(), name


def test_nan_and_inf_reach_the_outputs_float64_gives_them():
    rng = np.random.default_rng(3)
    a, b = _values(rng, (40, 30), np.float32), _values(rng, (30, 20), np.float32)
    a[3, 4], a[7, :] = np.nan, 0
    a[7, 2] = np.inf  # inf times the zeros of b's row 2 makes NaN where b[2, j] == 0
    b[5, 6] = -np.inf
    b[2, ::3] = 0
    with np.errstate(all="ignore"):
        want = a.astype(np.float64) @ b.astype(np.float64)
        got = gemm.matmul(a, b)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["integers", "mixed dtypes", "float16", "reversed rows", "broadcast rows",
                                  "out overlaps a", "empty inner", "empty rows"])
def test_what_cblas_cannot_read_in_place_is_numpys_product(case):
    rng = np.random.default_rng(5)
    a, b = _values(rng, (9, 6), np.float32), _values(rng, (6, 4), np.float32)
    out = None
    if case == "integers":
        a, b = rng.integers(-5, 5, (9, 6)), rng.integers(-5, 5, (6, 4))
    elif case == "mixed dtypes":
        b = b.astype(np.float64)
    elif case == "float16":
        a, b = a.astype(np.float16), b.astype(np.float16)
    elif case == "reversed rows":
        a = a[::-1]
    elif case == "broadcast rows":
        a = np.broadcast_to(a[:1], (9, 6))
    elif case == "out overlaps a":
        a = _values(rng, (6, 6), np.float32)
        b = _values(rng, (6, 6), np.float32)
        out = a
    elif case == "empty inner":
        a, b = a[:, :0], b[:0]
    elif case == "empty rows":
        a = a[:0]
    want = np.matmul(a.copy(), b)
    got = gemm.matmul(a, b, out=out)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("m,k,n", [(300, 576, 64), (64, 1152, 300), (4, 4608, 512), (37, 17, 29)])
def test_parts_of_a_few_rows_or_columns_or_more_give_the_whole_products_bits(m, k, n):
    """graph_ir/executors/threads.py splits products so (parts of MIN_SPLIT_ROWS rows or MIN_SPLIT_COLUMNS columns
    at least), and its results must not depend on the thread count. (NumPy's OpenBLAS promises no such thing, nor
    does oneMKL for fewer rows or columns: its kernels for those sum in another order.)"""
    if not MKL:
        pytest.skip("oneMKL is not what runs the products here")
    rng = np.random.default_rng(7)
    a, b = _values(rng, (m, k), np.float32), _values(rng, (k, n), np.float32)
    whole = gemm.matmul(a, b)
    rows, columns = threads.MIN_SPLIT_ROWS, threads.MIN_SPLIT_COLUMNS
    for cut in sorted({rows, m // 3, m // 2, m - rows} - {0, m}):
        if cut >= rows and m - cut >= rows:
            np.testing.assert_array_equal(np.concatenate([gemm.matmul(a[:cut], b), gemm.matmul(a[cut:], b)]), whole)
    for cut in sorted({columns, n // 2, n - columns} - {0, n}):
        if cut >= columns and n - cut >= columns:
            left, right = gemm.matmul(a, b[:, :cut]), gemm.matmul(a, b[:, cut:])
            np.testing.assert_array_equal(np.concatenate([left, right], axis=1), whole)


def test_products_in_two_threads_at_once_equal_those_in_one():
    rng = np.random.default_rng(11)
    pairs = [(_values(rng, (200, 300), np.float32), _values(rng, (300, 150), np.float32)) for _ in range(6)]
    want = [gemm.matmul(a, b) for a, b in pairs]
    got: list = [None] * len(pairs)

    def run(first: int) -> None:
        for i in range(first, len(pairs), 2):
            for _ in range(5):
                got[i] = gemm.matmul(*pairs[i])

    workers = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert not any(w.is_alive() for w in workers)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
