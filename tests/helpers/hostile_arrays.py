"""Hostile calls of graph_ir's C++ binding and graph_ir.kernels, run as a script in a child process by
tests/graph_ir/test_hostile_arrays.py (so that a crash would be seen as a signal, not kill the test run).
Prints one line per case: its name and the error type it raised ("ok" when it ran)."""

from __future__ import annotations

import numpy as np

from graph_ir import _binding, kernels


class LyingSize(np.ndarray):
    """An ndarray subclass whose size and shape lie: the binding must take the count from the buffer itself."""

    size = property(lambda self: 1 << 28)


def cases():
    f32 = lambda n=8: np.ones(n, np.float32)
    liar = f32().view(LyingSize)
    yield "lying size, kernels", lambda: kernels.inplace_apply_power_sign(liar, f32(), 0.1, 1.0, 1.0, 0.9, f32())
    yield "lying size, binding", lambda: _binding.power_sign("float32", liar, f32(), f32(), 0.1, 1.0, 1.0, 0.9)
    yield "float64 name on float32", lambda: _binding.power_sign("float64", f32(), f32(), f32(), 0.1, 1, 1, 0.9)
    yield "float16 name on float32", lambda: _binding.power_sign("float16", f32(), f32(), f32(), 0.1, 1, 1, 0.9)
    yield "unknown dtype name", lambda: _binding.power_sign("int8", f32(), f32(), f32(), 0.1, 1, 1, 0.9)
    yield "big-endian", lambda: _binding.power_sign("float32", np.ones(8, ">f4"), f32(), f32(), 0.1, 1, 1, 0.9)
    yield "count mismatch", lambda: _binding.power_sign("float32", f32(8), f32(7), f32(8), 0.1, 1, 1, 0.9)
    yield "strided", lambda: _binding.power_sign("float32", f32(16)[::2], f32(8), f32(8), 0.1, 1, 1, 0.9)
    readonly = f32()
    readonly.flags.writeable = False
    yield "read-only var", lambda: _binding.power_sign("float32", readonly, f32(), f32(), 0.1, 1, 1, 0.9)
    shared = f32(16)
    yield "overlap", lambda: _binding.power_sign("float32", shared[:8], shared[4:12], f32(), 0.1, 1, 1, 0.9)
    yield "bytes as var", lambda: _binding.power_sign("float32", b"\0" * 32, f32(), f32(), 0.1, 1, 1, 0.9)
    yield "not a buffer", lambda: _binding.power_sign("float32", 3, f32(), f32(), 0.1, 1, 1, 0.9)
    yield "fused float64", lambda: _binding.fused_ema_adam("float64", *(np.ones(4) for _ in range(5)), 1, 0.1, 0.9,
                                                           0.9, 0.999, 1e-8, 1, True, 0.0)
    yield "fused count mismatch", lambda: _binding.fused_ema_adam("float32", f32(8), f32(8), f32(8), f32(8), f32(9),
                                                                  1, 0.1, 0.9, 0.9, 0.999, 1e-8, 1, True, 0.0)
    yield "big-endian kernels", lambda: kernels.inplace_apply_power_sign(np.ones(8, ">f4"), np.ones(8, ">f4"), 0.1,
                                                                         1.0, 1.0, 0.9, np.ones(8, ">f4"))
    yield "valid call", lambda: _binding.power_sign("float32", f32(), f32(), f32(), 0.1, 1.0, 1.0, 0.9)


if __name__ == "__main__":
    for name, call in cases():
        try:
            call()
            print(f"{name}: ok", flush=True)
        except Exception as e:  # noqa: BLE001 - the parent checks which type each case raised
            print(f"{name}: {type(e).__name__}: {e}", flush=True)
