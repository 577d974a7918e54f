"""Subnormal inputs and results, flushed to zero as TF's CPU kernels flush them (FTZ and DAZ during a run:
graph_ir/executors/denormals.py): each op on float32 and float64 values that are subnormal, or whose products,
quotients, sums and exponentials are, compared with tf.raw_ops bitwise (the sign of every zero); the caller's NumPy
keeps its subnormals after a run."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from graph_ir import ops
from graph_ir.executors import denormals
from tests.graph_ir.test_hostile_values import _run, _same

pytestmark = pytest.mark.skipif(not denormals.supported(), reason="FTZ and DAZ are set through glibc on x86-64")


def _values(dtype, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """x and y of 64 elements: subnormals of both signs, tiny normals whose products and quotients are subnormal,
    zeros of both signs, ordinary values; y never 0 where x / y is taken."""
    tiny = np.finfo(dtype).tiny
    rng = np.random.default_rng(seed)
    special = np.array([tiny / 3, -tiny / 7, tiny * 0.5, tiny, -tiny, 1e-20 if dtype == np.float32 else 1e-160,
                        -0.0, 0.0, 1.0, -2.5, 3e-5, tiny * 2**-20], np.float64)
    x = np.concatenate([special, rng.standard_normal(52) * np.exp(rng.uniform(-90, 0, 52))]).astype(dtype)
    y = np.concatenate([special[::-1], rng.standard_normal(52) * 1e-19]).astype(dtype)
    y[y == 0] = dtype(1e-19)
    return rng.permutation(x), y


_BINARY = {"Mul": lambda x, y: tf.raw_ops.Mul(x=x, y=y), "RealDiv": lambda x, y: tf.raw_ops.RealDiv(x=x, y=y),
           "AddV2": lambda x, y: tf.raw_ops.AddV2(x=x, y=y), "Sub": lambda x, y: tf.raw_ops.Sub(x=x, y=y),
           "Maximum": lambda x, y: tf.raw_ops.Maximum(x=x, y=y), "Minimum": lambda x, y: tf.raw_ops.Minimum(x=x, y=y),
           "SquaredDifference": lambda x, y: tf.raw_ops.SquaredDifference(x=x, y=y)}
_UNARY = {"Neg": tf.raw_ops.Neg, "Abs": tf.raw_ops.Abs, "Square": tf.raw_ops.Square, "Sqrt": tf.raw_ops.Sqrt,
          "Exp": tf.raw_ops.Exp, "Sign": tf.raw_ops.Sign, "Floor": tf.raw_ops.Floor}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", list(_BINARY))
def test_binary_results_and_inputs_are_flushed(op, dtype):
    x, y = _values(dtype, seed=len(op))
    _same(_run(lambda a, b: getattr(ops, op)(a, b), x, y)[0], _BINARY[op](x, y))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", list(_UNARY))
def test_unary_results_and_inputs_are_flushed(op, dtype):
    x, _ = _values(dtype, seed=len(op))
    if op == "Exp":
        x = np.abs(x) - dtype(90 if dtype == np.float32 else 710)  # exp of these is subnormal or tiny
    _same(_run(lambda a: getattr(ops, op)(a), x)[0], _UNARY[op](x=x))


def test_the_callers_numpy_keeps_its_subnormals():
    x = np.full(8, 1e-20, np.float32)
    _run(lambda a, b: ops.Mul(a, b), x, x)
    assert (x * np.float32(1e-19))[0] != 0  # FTZ was restored after the run
