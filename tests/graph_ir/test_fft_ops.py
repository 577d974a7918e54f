"""The FFT family (graph_ir/lowering/ops/fft.py) and complex64 arithmetic: each TF op alone in a tf.function,
lowered, run in graph_ir.Session and compared with TensorFlow on inputs with zeros, -0.0, ties, odd sizes and (for
the part ops) NaN and +-inf; then the gradient of each transform through tf.GradientTape, lowered as TF's gradient
graph holds it (IFFT for FFT, RFFT for IRFFT, Complex and Real for the parts, complex Mul and DivNoNan).

Tolerances: 0 (bitwise) for the ops that move float32 parts (Complex, Real, Imag) and for ComplexAbs (hypotf both
sides). The transforms: the executors round the complex128 transform once, TF's DUCC kernels accumulate float32
roundings over log2(n) butterfly stages, so they agree within ROUNDING (2e-6) of the output's scale (measured: within
1.5e-7 on these sizes, and the gradients within 1.3e-7). Complex products and quotients: NumPy's and Eigen's complex multiply and divide round their
parts in another order, a few float32 roundings apart: ROUNDING (2e-6)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from tests.graph_ir.test_activation_ops import assert_matches, check_case, run_lowered
from tests.graph_ir.test_family_ops import ROUNDING, _floats

_SPECIALS = [0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0]


def _complex(rng, *shape, specials: bool = False) -> np.ndarray:
    """Complex values with zeros and ties in both parts (and NaN, +-inf, -0.0 in the first elements if `specials`)."""
    z = (_floats(rng, *shape) + 1j * _floats(rng, *shape)[..., ::-1]).astype(np.complex64)
    if specials:
        flat = z.reshape(-1)
        flat[:len(_SPECIALS)] = [complex(a, b) for a, b in zip(_SPECIALS, _SPECIALS[::-1])]
    return z


def _rfft(n):
    return lambda x: tf.signal.rfft(x, fft_length=[n])


def _irfft(n):
    return lambda z: tf.signal.irfft(z, fft_length=[n])


# name -> (function of tensors, inputs from rng, tolerance); named "<TF op>-<case>" (tests/packaging reads them)
CASES = {
    "Complex-broadcast": (tf.complex, lambda r: [_floats(r, 3, 5), _floats(r, 5)], 0),
    "Complex-specials": (tf.complex, lambda r: [np.array(_SPECIALS, np.float32), np.array(_SPECIALS[::-1], np.float32)],
                         0),
    "Real": (tf.math.real, lambda r: [_complex(r, 4, 7, specials=True)], 0),
    "Imag": (tf.math.imag, lambda r: [_complex(r, 4, 7, specials=True)], 0),
    "ComplexAbs": (tf.abs, lambda r: [_complex(r, 5, 9, specials=True)], 0),
    "FFT": (tf.signal.fft, lambda r: [_complex(r, 3, 37)], ROUNDING),
    "FFT-power_of_two": (tf.signal.fft, lambda r: [_complex(r, 2, 64)], ROUNDING),
    "FFT-empty_batch": (tf.signal.fft, lambda r: [np.zeros((0, 8), np.complex64)], ROUNDING),
    "IFFT": (tf.signal.ifft, lambda r: [_complex(r, 5, 12)], ROUNDING),
    "FFT2D": (tf.signal.fft2d, lambda r: [_complex(r, 2, 9, 16)], ROUNDING),
    "IFFT2D": (tf.signal.ifft2d, lambda r: [_complex(r, 3, 7, 5)], ROUNDING),
    "RFFT": (_rfft(31), lambda r: [_floats(r, 4, 31)], ROUNDING),
    "RFFT-crop": (_rfft(16), lambda r: [_floats(r, 3, 21)], ROUNDING),
    "RFFT-pad": (_rfft(50), lambda r: [_floats(r, 2, 3, 17)], ROUNDING),
    "IRFFT-even": (_irfft(32), lambda r: [_complex(r, 3, 17)], ROUNDING),  # DC and Nyquist imaginary parts unread
    "IRFFT-odd": (_irfft(15), lambda r: [_complex(r, 4, 8)], ROUNDING),
    "IRFFT-crop_and_pad": (_irfft(8), lambda r: [_complex(r, 2, 11)], ROUNDING),
    "IRFFT-pad": (_irfft(40), lambda r: [_complex(r, 2, 6)], ROUNDING),
}


@pytest.mark.parametrize("name", list(CASES))
def test_lowered_op_runs_like_tensorflow(name):
    check_case(name, CASES[name])


# complex64 arithmetic that the transforms' gradients hold: (function, inputs, GE op, tolerance)
ARITHMETIC = {
    "Mul": (tf.multiply, lambda r: [_complex(r, 3, 7), _complex(r, 7)], "Mul", ROUNDING),
    "AddV2": (tf.add, lambda r: [_complex(r, 3, 7), _complex(r, 3, 1)], "AddV2", 0),
    "Sub": (tf.subtract, lambda r: [_complex(r, 9), _complex(r, 9)], "Sub", 0),
    "Neg": (tf.negative, lambda r: [_complex(r, 9, specials=True)], "Neg", 0),
    "RealDiv": (tf.divide, lambda r: [_complex(r, 9), _complex(r, 9) + 2], "RealDiv", ROUNDING),
    "DivNoNan": (tf.math.divide_no_nan, lambda r: [_complex(r, 4, 9), _complex(r, 4, 9) * (np.arange(9) % 3 > 0)],
                 "SelectV2", ROUNDING),
    "AddN": (lambda a, b, c: tf.add_n([a, b, c]), lambda r: [_complex(r, 2, 5) for _ in range(3)], "AddN", 0),
    "StridedSlice": (lambda z: z[:, 1::2], lambda r: [_complex(r, 3, 9)], "StridedSlice", 0),
    "Cast-from_float": (lambda x: tf.cast(x, tf.complex64), lambda r: [_floats(r, 7)], "Cast", 0),
    "Cast-to_float": (lambda z: tf.cast(z, tf.float32), lambda r: [_complex(r, 7)], "Cast", 0),
    "Reshape": (lambda z: tf.reshape(z, [-1]), lambda r: [_complex(r, 3, 5)], "Reshape", 0),
    "Const": (lambda x: tf.complex(x, x) * tf.constant([1 + 2j, -0.5j, 3], tf.complex64),
              lambda r: [_floats(r, 3)], "Complex", ROUNDING),
}


@pytest.mark.parametrize("name", list(ARITHMETIC))
def test_complex_arithmetic_runs_like_tensorflow(name):
    fn, make_inputs, ge_type, tolerance = ARITHMETIC[name]
    check_case(name, (fn, make_inputs, tolerance), ge_type)


def _gradient(fn):
    """The gradients of sum(real and imaginary parts of fn(*xs) * weights) with respect to every x."""

    def step(*xs):
        with tf.GradientTape() as tape:
            tape.watch(xs)
            y = fn(*xs)
            weights = tf.cast(tf.reshape(tf.range(tf.size(y)) % 5 - 2, tf.shape(y)), tf.float32)
            parts = [tf.math.real(y), tf.math.imag(y)] if y.dtype.is_complex else [y]
            loss = tf.add_n([tf.reduce_sum(p * weights) for p in parts])
        return tape.gradient(loss, xs)

    return step


GRADIENTS = {
    "FFT": (tf.signal.fft, lambda r: [_complex(r, 3, 10)]),
    "IFFT": (tf.signal.ifft, lambda r: [_complex(r, 2, 7)]),
    "FFT2D": (tf.signal.fft2d, lambda r: [_complex(r, 2, 6, 5)]),
    "IFFT2D": (tf.signal.ifft2d, lambda r: [_complex(r, 4, 3)]),
    "RFFT": (_rfft(16), lambda r: [_floats(r, 3, 16)]),
    "IRFFT": (_irfft(14), lambda r: [_complex(r, 2, 8)]),
    "Complex": (tf.complex, lambda r: [_floats(r, 3, 4), _floats(r, 3, 4)]),
    "ComplexAbs": (tf.abs, lambda r: [_complex(r, 11)]),
}


@pytest.mark.parametrize("name", list(GRADIENTS))
def test_gradient_through_the_op_lowers_and_runs_like_tensorflow(name):
    fn, make_inputs = GRADIENTS[name]
    inputs = make_inputs(np.random.default_rng(zlib.crc32(f"grad-{name}".encode())))
    _, got, want = run_lowered(_gradient(fn), inputs)
    assert len(got) == len(want) == len(inputs)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_matches(g, w, ROUNDING, f"gradient of {name} with respect to input {k}")


def test_a_transform_of_too_low_a_rank_is_refused_naming_the_node():  # TF refuses it when tracing; a file may hold it
    graph = graph_ir.Graph("g")
    with graph, pytest.raises(graph_ir.GraphError, match=r"FFT2D 'FFT2D': input 'x' has shape \[6\].*rank >= 2"):
        graph_ir.ops.FFT2D(graph_ir.Data(0, "complex64", (6,), name="z"))


@pytest.mark.parametrize("fn, spec, match", [
    # TF's kernel aborts the process on a zero length and reads uninitialized memory for an empty innermost axis
    (_rfft(0), tf.TensorSpec([2, 5]), r"RFFT '.*': input 'fft_length' is 0"),
    (_irfft(0), tf.TensorSpec([2, 5], tf.complex64), r"IRFFT '.*': input 'fft_length' is 0"),
    (_rfft(4), tf.TensorSpec([3, 0]), r"RFFT '.*': input 'input' has shape \[3, 0\].*uninitialized"),
    (_irfft(4), tf.TensorSpec([3, 0], tf.complex64), r"IRFFT '.*': input 'x' has shape \[3, 0\].*uninitialized"),
])
def test_transforms_tf_cannot_compute_are_refused_naming_the_node(fn, spec, match):
    with pytest.raises(graph_ir.GraphError, match=match):
        graph_ir.from_tensorflow(tf.function(fn), spec)


def test_a_transform_length_known_only_when_running_is_refused():
    step = tf.function(lambda x, n: tf.signal.rfft(x, fft_length=tf.reshape(n, [1])))
    with pytest.raises(graph_ir.GraphError, match=r"Pad '.*': its paddings are computed in the step and the size of dim 1 of y"):
        graph_ir.from_tensorflow(step, tf.TensorSpec([2, 8]), tf.TensorSpec([], tf.int32))


def test_complex_values_survive_a_saved_file(tmp_path):
    """A step with complex64 inputs, intermediates, a complex constant and outputs: saved as .air, loaded back, run."""
    step = tf.function(lambda z: tf.signal.fft(z * tf.constant(1 - 1j, tf.complex64)))
    z = _complex(np.random.default_rng(1), 2, 9)
    graph = graph_ir.from_tensorflow(step, tf.TensorSpec(z.shape, tf.complex64))
    path = str(tmp_path / "fft.air")
    graph.save(path)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.load(path))
    (got,) = session.run_graph(0, [z])
    assert_matches(got, step(z).numpy(), ROUNDING, "fft after a round trip")
