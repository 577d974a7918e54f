"""graph_ir.kernels and its C++ binding against hostile arrays: lying subclasses, wrong formats, foreign byte
order, overlap (also through two mappings of one file). A clear TypeError/ValueError, nothing written, no crash."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import graph_ir
from graph_ir import kernels
from tests.helpers import ROOT

EXPECTED = {
    "lying size, kernels": "ok",
    "lying size, binding": "ok",
    "float64 name on float32": "TypeError: var has buffer format 'f' (item size 4); expected float64",
    "float16 name on float32": "TypeError: var has buffer format 'f'",
    "unknown dtype name": "ValueError: unsupported dtype 'int8'",
    "big-endian": "TypeError: var has buffer format '>f'",
    "count mismatch": "ValueError: m has 7 elements but var has 8",
    "strided": "ValueError: var must be C-contiguous",
    "read-only var": "ValueError: var is updated in place but is not a writable buffer",
    "overlap": "ValueError: var and m share memory",
    "bytes as var": "ValueError: var is updated in place but is not a writable buffer",
    "not a buffer": "TypeError: power_sign(): incompatible function arguments",
    "fused float64": "TypeError: fused_ema_adam: float64 is not supported",
    "fused count mismatch": "ValueError: s has 9 elements but var has 8",
    "big-endian kernels": "ValueError: inplace_apply_power_sign: var has non-native byte order (>f4)",
    "valid call": "ok",
}


def test_binding_trusts_nothing_from_python():
    result = subprocess.run([sys.executable, "-m", "tests.helpers.hostile_arrays"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])  # a signal would be negative
    got = dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line and not line[0].isspace())
    for name, want in EXPECTED.items():
        assert got.get(name, "").startswith(want), (name, got.get(name))


def test_lying_size_updates_the_real_elements():
    class LyingSize(np.ndarray):
        size = property(lambda self: 1 << 28)

    var = np.linspace(-1, 1, 8).astype(np.float32)
    liar = var.copy().view(LyingSize)
    m, grad = np.zeros(8, np.float32), np.full(8, 0.5, np.float32)
    kernels.inplace_apply_power_sign(liar, m.copy(), 0.1, 1.0, 1.0, 0.9, grad)
    kernels.inplace_apply_power_sign(var, m, 0.1, 1.0, 1.0, 0.9, grad)
    np.testing.assert_array_equal(np.asarray(liar), var)


def test_two_shared_mappings_of_one_file_are_aliasing(tmp_path):
    path = tmp_path / "state.bin"
    np.zeros(64, np.float32).tofile(path)
    var = np.memmap(path, np.float32, mode="r+", shape=(64,))
    m = np.memmap(path, np.float32, mode="r+", shape=(64,))
    grad = np.ones(64, np.float32)
    with pytest.raises(ValueError, match="var and m map the same bytes of one file"):
        kernels.inplace_apply_power_sign(var, m, 0.1, 1.0, 1.0, 0.9, grad)
    np.testing.assert_array_equal(np.asarray(var), 0.0)
    # Disjoint parts of one file, and a private (copy-on-write) mapping, are not aliasing.
    first, second = np.memmap(path, np.float32, "r+", shape=(32,)), np.memmap(path, np.float32, "r+", 128, (32,))
    kernels.inplace_apply_power_sign(first, second, 0.1, 1.0, 1.0, 0.9, grad[:32])
    private = np.memmap(path, np.float32, mode="c", shape=(64,))
    kernels.inplace_apply_power_sign(private, np.zeros(64, np.float32), 0.1, 1.0, 1.0, 0.9, np.asarray(m).copy())


def test_big_endian_values_are_read_as_their_values():
    """A Variable, Const or fed Data holding big-endian data computes with its values, not garbage."""
    values = np.linspace(-2, 2, 8)
    results = []
    for order in ("<", ">"):
        graph = graph_ir.Graph("g")
        with graph:
            var = graph_ir.Variable("w", values.astype(f"{order}f4"))
            m = graph_ir.Variable("m", np.zeros(8, f"{order}f4"))
            grad = graph_ir.Data(0, "float32", (8,))
            lr = graph_ir.Const(np.array([0.1], f"{order}f4"))
            out, _ = graph_ir.ops.InplaceApplyPowerSign(var, m, lr, 1.0, 1.0, 0.9, grad)
            graph.set_outputs([out])
        session = graph_ir.Session()
        session.add_graph(0, graph)
        results.append(session.run_graph(0, [np.full(8, 0.25, f"{order}f4")])[0])
    np.testing.assert_array_equal(results[0], results[1])
    assert np.all(np.isfinite(results[1])) and results[1].dtype == np.float32
