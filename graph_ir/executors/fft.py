"""The FFT family's executors (prototypes: graph_ir/opset/fft.py).

The transforms run in complex128 (NumPy's pocketfft) and are rounded once to complex64: within an ulp of the exact
transform of the float32 input. TF's CPU kernels (tensorflow/core/kernels/fft_ops.cc, DUCC in float32) accumulate
O(log n) roundings, so the lowering tests compare within a stated tolerance of the output's scale, not bitwise. As
TF's, the inverses are scaled by 1/n, RFFT crops or zero-pads its input's innermost axis to fft_length, IRFFT its
half-spectrum to fft_length/2 + 1 and ignores the imaginary parts of the terms a real signal's spectrum holds real;
an empty input gives the empty result TF gives (a zero length and an empty innermost axis are refused by the
prototypes: TF's kernel aborts or reads uninitialized memory on them). Complex, Real and Imag move float32 parts
exactly; ComplexAbs is hypot, correctly rounded as TF's std::abs."""

from __future__ import annotations

import numpy as np

from graph_ir.executors.common import Executor, at_dtype
from graph_ir.ir.nodes import Node


def _complex(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    real, imag = np.broadcast_arrays(*args)
    out = np.empty(real.shape, np.complex64)
    out.real, out.imag = real, imag
    return [out]


def _transform(fn, axes: tuple[int, ...]) -> Executor:
    def run(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        x = args[0]
        if x.size == 0:
            return [np.zeros(x.shape, np.complex64)]
        with np.errstate(all="ignore"):
            return [at_dtype(node, 0, fn(x.astype(np.complex128), axes=axes))]

    return run


def _rfft(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, n = args[0], int(args[1].reshape(-1)[0])
    shape = node.output_descs[0].shape
    if 0 in shape:  # an empty batch (the prototype refuses a zero length and an empty innermost axis)
        return [np.zeros(shape, np.complex64)]
    with np.errstate(all="ignore"):
        return [at_dtype(node, 0, np.fft.rfft(x.astype(np.float64), n=n, axis=-1))]


def _irfft(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, n = args[0], int(args[1].reshape(-1)[0])
    shape = node.output_descs[0].shape
    if 0 in shape:
        return [np.zeros(shape, np.float32)]
    half = x[..., :n // 2 + 1].astype(np.complex128)
    if half.shape[-1] < n // 2 + 1:  # zero-padded, as TF pads a short half-spectrum
        half = np.concatenate([half, np.zeros((*half.shape[:-1], n // 2 + 1 - half.shape[-1]), half.dtype)], -1)
    half[..., 0] = half[..., 0].real  # the terms a real signal's spectrum holds real: their imaginary parts unread
    if n % 2 == 0:
        half[..., -1] = half[..., -1].real
    with np.errstate(all="ignore"):
        return [at_dtype(node, 0, np.fft.irfft(half, n=n, axis=-1))]


EXECUTORS: dict[str, Executor] = {
    "Complex": _complex,
    "Real": lambda node, args: [np.ascontiguousarray(args[0].real)],
    "Imag": lambda node, args: [np.ascontiguousarray(args[0].imag)],
    "ComplexAbs": lambda node, args: [np.hypot(args[0].real, args[0].imag)],
    "FFT": _transform(np.fft.fftn, (-1,)),
    "IFFT": _transform(np.fft.ifftn, (-1,)),
    "FFT2D": _transform(np.fft.fftn, (-2, -1)),
    "IFFT2D": _transform(np.fft.ifftn, (-2, -1)),
    "RFFT": _rfft,
    "IRFFT": _irfft,
}
