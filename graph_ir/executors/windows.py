"""Window geometry shared by the conv and pool executors (graph_ir/executors/conv.py, pool.py): which taps of a
sliding window read the input, and for which outputs. Only those taps do any work, so time and memory follow the
data, not the window's area when the window is mostly padding (padding contributes nothing, as in TF's kernels
with SAME padding: tensorflow/core/kernels/conv_ops.cc, pooling_ops_common.h)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# The most one im2col chunk (or any other per-step temporary) may hold. Below glibc's largest mmap threshold (32 MiB):
# a larger temporary is a fresh mmap each time, its pages faulted in and zeroed on first touch, which made a 3x3
# convolution over 8x64x64x64 take 40 ms instead of 24 (its 75 MB of windows in two 64 MiB chunks).
CHUNK_BYTES = 16 * 2**20
# NumPy's buffers for a ufunc over strided views (up to 3 operands of np.getbufsize() elements, 8 bytes at most) and
# small operands a matrix product copies: what every conv and pool executor may hold beyond its stated arrays.
UFUNC_BUFFERS = 4 * 8192 * 8


@dataclass(frozen=True)
class AxisTap:
    """Tap `tap` of a window along one axis reads input index `start + (o - first) * stride` for the outputs
    o in [first, stop), and only padding for the other outputs."""

    tap: int
    first: int
    stop: int
    start: int

    @property
    def count(self) -> int:
        return self.stop - self.first

    def reads(self, stride: int) -> slice:
        """The input indices it reads, as a slice."""
        return slice(self.start, self.start + (self.count - 1) * stride + 1, stride)

    def clipped(self, outputs: slice, stride: int) -> AxisTap | None:
        """The same tap for the outputs in [outputs.start, outputs.stop) only (None if it reads for none)."""
        first, stop = max(self.first, outputs.start), min(self.stop, outputs.stop)
        return AxisTap(self.tap, first, stop, self.start + (first - self.first) * stride) if first < stop else None

    @property
    def writes(self) -> slice:
        """The outputs it reads for, as a slice."""
        return slice(self.first, self.stop)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def axis_taps(size: int, out: int, k: int, stride: int, dilation: int, before: int) -> list[AxisTap]:
    """The taps i in [0, k) of a window (taps `dilation` apart, moved by `stride`, after `before` padding) that read
    the input [0, size) for some output o in [0, out): 0 <= o*stride + i*dilation - before < size.

    Candidates are only the taps between the first output's last real read and the last output's first, so the
    work is at most min(k, (size - 1 + (out - 1)*stride) / dilation + 1) whatever the padding."""
    if size <= 0 or out <= 0 or k <= 0:
        return []
    lo = max(0, _ceil_div(before - (out - 1) * stride, dilation))
    hi = min(k - 1, (size - 1 + before) // dilation)
    if lo > hi:
        return []
    # Offsets relative to tap lo keep the arithmetic small; object arrays only when int64 could overflow.
    base = lo * dilation - before  # the index tap lo reads for output 0, in [-(out-1)*stride, size)
    big = max(abs(base), (hi - lo) * dilation, (out - 1) * stride, size) >= 2**62
    steps = np.arange(hi - lo + 1, dtype=object if big else np.int64)
    offset = base + steps * dilation  # what tap lo + step reads for output 0
    first = np.maximum(0, -(offset // stride))  # ceil(-offset / stride)
    stop = np.minimum(out, (size - 1 - offset) // stride + 1)
    keep = np.flatnonzero(first < stop)
    return [AxisTap(lo + int(s), int(first[s]), int(stop[s]), int(offset[s] + first[s] * stride)) for s in keep]


def window_counts(size: int, out: int, k: int, stride: int, before: int) -> np.ndarray:
    """How many taps of each output's window (k wide, dilation 1) lie inside the input: [out] int64."""
    starts = np.arange(out, dtype=np.int64) * stride - before if out else np.zeros(0, np.int64)
    return np.minimum(size, starts + k) - np.maximum(0, starts)
