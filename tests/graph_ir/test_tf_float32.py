"""graph_ir/executors/tf_float32.py: float32 arithmetic rounded as TF's CPU kernels round it (what CTCLoss's executor
takes), bitwise: Eigen's exp against TF's Exp kernel, Eigen's vector sum through TF's CTCLoss softmax, log1pf against
this process's libm."""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np
import pytest
import tensorflow as tf

from graph_ir.executors import tf_float32


def test_eigen_exp_is_tfs():
    """TF's Exp kernel runs Eigen's exp: over, under and at its clamps, subnormal results (flushed), zeros."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-110, 90, 20000), rng.standard_normal(20000), [0, -0.0, 88.7, -104, -87.5]])
    x = x.astype(np.float32)
    np.testing.assert_array_equal(tf_float32.eigen_exp(x), tf.math.exp(x).numpy())


@pytest.mark.parametrize("classes", [2, 3, 8, 9, 16, 17, 23, 40])
def test_eigen_sum_is_tfs_softmax_denominator(classes):
    """Seen through CTCLoss's softmax: with labels of class 0, the gradient of classes 1.. is y itself."""
    logits = (np.random.default_rng(classes).standard_normal((3, 2, classes)) * 3).astype(np.float32)
    _, grad = tf.raw_ops.CTCLoss(inputs=logits, labels_indices=np.array([[0, 0], [1, 0]]),
                                 labels_values=np.zeros(2, np.int32), sequence_length=np.array([3, 3], np.int32))
    e = tf_float32.eigen_exp(logits - logits.max(axis=2, keepdims=True))
    np.testing.assert_array_equal((e / tf_float32.eigen_sum(e)[..., None])[..., 1:-1], grad.numpy()[..., 1:-1])


def test_log1pf_is_libms():
    rng = np.random.default_rng(4)
    lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    lib.log1pf.restype, lib.log1pf.argtypes = ctypes.c_float, [ctypes.c_float]
    x = np.concatenate([rng.uniform(0, 1, 3000), np.exp(-rng.uniform(0, 90, 3000)), [0, 1, 2.0**-29, 0.41422]])
    x = x.astype(np.float32)
    want = np.array([lib.log1pf(float(v)) for v in x], np.float32)
    np.testing.assert_array_equal(tf_float32.libm_log1pf(x), want)
