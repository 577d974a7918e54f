"""graph_ir.kernels (the aclnn-style face) against the TF ops, bitwise (the same kernels), and its argument checks;
graph_ir.Session's in-place Variables and RefData, get/set_variables, and the two examples."""

from __future__ import annotations

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

import graph_ir
import tf_plugin
from graph_ir import kernels, ops
from op_spec.reference import random_tensor
from tests.helpers import ROOT


def _power_sign_equals_the_tf_op(var: np.ndarray, m: np.ndarray, grad: np.ndarray, scalars: dict) -> None:
    """graph_ir.kernels updates var and m in place bitwise as the TF op updates copies of them."""
    tv, tm = tf.Variable(var), tf.Variable(m)
    tf_plugin.raw_ops.ResourceApplyPowerSign(var=tv, m=tm, grad=grad, **{k: tf.constant(v, tv.dtype)
                                                                          for k, v in scalars.items()})
    kernels.inplace_apply_power_sign(var, m, grad=grad, **scalars)
    np.testing.assert_array_equal(var.view(np.uint8), tv.numpy().view(np.uint8))
    np.testing.assert_array_equal(m.view(np.uint8), tm.numpy().view(np.uint8))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("n", [0, 1, 17, 1000, 70001])
def test_power_sign_equals_the_tf_op(dtype, n):
    rng = np.random.default_rng(n)
    var, m, grad = (random_tensor(rng, (n,), dtype) for _ in range(3))
    _power_sign_equals_the_tf_op(var, m, grad, {"lr": 0.03, "logbase": 0.7, "sign_decay": 0.9, "beta": 0.8})


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("mode", [0, 1])
def test_fused_ema_adam_equals_the_tf_op(dtype, mode):
    rng = np.random.default_rng(mode)
    grad, var, m, s = (random_tensor(rng, (3001,), dtype) for _ in range(4))
    v = np.abs(random_tensor(rng, (3001,), dtype))
    attrs = {"lr": 0.01, "ema_decay": 0.9, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "mode": mode,
             "weight_decay": 0.02}
    tvs = [tf.Variable(x) for x in (var, m, v, s)]
    tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(var=tvs[0], m=tvs[1], v=tvs[2], s=tvs[3], grad=grad, step=7, **attrs)
    kernels.apply_fused_ema_adam(grad, var, m, v, s, np.array([7], np.int64), **attrs)
    for got, want in zip((var, m, v, s), tvs):
        np.testing.assert_array_equal(got.view(np.uint8), want.numpy().view(np.uint8))


def test_bfloat16_subnormal_results_are_flushed_as_in_tf():
    """graph_ir.kernels runs with FTZ/DAZ as TF does, so a float32 result below 2^-126 is flushed, not rounded to
    bfloat16's subnormal grid, bitwise as the TF op (whose AVX512_BF16 stores then skip their subnormal test). Every
    bfloat16 pattern as grad, var = m = 0, scale 1, lr = -2^-120: var = g * 2^-120."""
    grad = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16)
    var, m = np.zeros_like(grad), np.zeros_like(grad)
    _power_sign_equals_the_tf_op(var, m, grad, {"lr": -(2.0**-120), "logbase": 0.0, "sign_decay": 1.0, "beta": 0.5})
    exact = grad.astype(np.float64) * 2.0**-120
    subnormal = (exact != 0) & (np.abs(exact) < np.finfo(np.float32).tiny)
    assert np.count_nonzero(subnormal) > 1000 and np.all(var[subnormal].astype(np.float32) == 0)
    m_subnormal = (grad != 0) & (np.abs(grad.astype(np.float64) * 0.5) < np.finfo(np.float32).tiny)
    assert np.count_nonzero(m_subnormal) > 100 and np.all(m[m_subnormal].astype(np.float32) == 0)


def _fresh(dtype="float32", n=6):
    rng = np.random.default_rng(0)
    return [random_tensor(rng, (n,), dtype) for _ in range(5)]


BAD = [
    (lambda a: kernels.inplace_apply_power_sign(list(a[0]), a[1], 0.1, 1.0, 1.0, 0.9, a[2]), TypeError,
     "var must be a NumPy array"),
    (lambda a: kernels.inplace_apply_power_sign(a[0], a[1].astype(np.float64), 0.1, 1.0, 1.0, 0.9, a[2]), TypeError,
     "m has dtype float64 but var has float32"),
    (lambda a: kernels.inplace_apply_power_sign(a[0].astype(np.int32), a[1], 0.1, 1.0, 1.0, 0.9, a[2]), TypeError,
     "var has dtype int32"),
    (lambda a: kernels.inplace_apply_power_sign(a[0], a[1][:5], 0.1, 1.0, 1.0, 0.9, a[2]), ValueError,
     r"m has shape \[5\] but var has \[6\]"),
    (lambda a: kernels.inplace_apply_power_sign(a[0], a[1], np.ones(2, np.float32), 1.0, 1.0, 0.9, a[2]), ValueError,
     r"lr must be a scalar"),
    (lambda a: kernels.inplace_apply_power_sign(a[0], a[1], np.float64(0.1) * np.ones(1), 1.0, 1.0, 0.9, a[2]),
     TypeError, "lr has dtype float64; expected float32"),
    (lambda a: kernels.inplace_apply_power_sign(a[0], a[0], 0.1, 1.0, 1.0, 0.9, a[2]), ValueError,
     "var and m share memory"),
    (lambda a: kernels.apply_fused_ema_adam(a[0], a[1], a[2], a[3], a[4], np.array([1], np.int32)), TypeError,
     "step must be int64"),
    (lambda a: kernels.apply_fused_ema_adam(a[0], a[1], a[2], a[3], a[4], np.array([1, 2], np.int64)), ValueError,
     "step must have one element"),
    (lambda a: kernels.apply_fused_ema_adam(a[0], a[1], a[2], a[3], a[4], 0), ValueError, "step must be >= 1"),
    (lambda a: kernels.apply_fused_ema_adam(a[0], a[1], a[2], a[3], a[4], 1, beta1=1.0), ValueError,
     r"beta1 must be in \[0, 1\)"),
    (lambda a: kernels.apply_fused_ema_adam(a[0], a[1], a[2], a[3], a[4], 1, mode=2), ValueError, "mode must be"),
    (lambda a: kernels.apply_fused_ema_adam(a[0], a[1], a[2], a[3], a[4], 1, eps=0.0), ValueError, "eps must be"),
    (lambda a: kernels.apply_fused_ema_adam(a[0], a[1], a[2], a[3], a[4], 1, lr=float("nan")), ValueError,
     "lr must be finite"),
    (lambda a: kernels.apply_fused_ema_adam(a[0], a[1].astype(np.float64), a[2], a[3], a[4], 1), TypeError,
     "var has dtype float64 but grad has float32"),
]


@pytest.mark.parametrize("k", range(len(BAD)))
def test_bad_arguments_write_nothing(k):
    fn, error, message = BAD[k]
    arrays = _fresh()
    before = [a.copy() for a in arrays]
    with pytest.raises(error, match=message):
        fn(arrays)
    for a, b in zip(arrays, before):
        np.testing.assert_array_equal(a, b)


def test_not_writable_and_not_contiguous():
    arrays = _fresh(n=8)
    arrays[1].flags.writeable = False
    with pytest.raises(ValueError, match="m is updated in place but is not writable"):
        kernels.inplace_apply_power_sign(arrays[0], arrays[1], 0.1, 1.0, 1.0, 0.9, arrays[2])
    big = _fresh(n=16)
    with pytest.raises(ValueError, match="var must be C-contiguous"):
        kernels.inplace_apply_power_sign(big[0][::2], big[1][::2], 0.1, 1.0, 1.0, 0.9, big[2][::2])


def test_session_updates_variables_in_place_and_refdata_in_the_callers_buffer():
    rng = np.random.default_rng(9)
    graph = graph_ir.Graph("g")
    with graph:
        var = graph_ir.Variable("w", random_tensor(rng, (64,), "float32"))
        m = graph_ir.Data(0, "float32", (64,), name="m", ref=True)
        grad = graph_ir.Data(1, "float32", (64,), name="grad")
        new_var, _new_m = ops.InplaceApplyPowerSign(var, m, 0.1, 1.0, 1.0, 0.9, grad)
        graph.set_outputs([new_var])
    session = graph_ir.Session()
    session.add_graph(0, graph)
    held = session._variables["w"]
    address = held.ctypes.data
    m_buffer = random_tensor(rng, (64,), "float32")
    m_address, m_before = m_buffer.ctypes.data, m_buffer.copy()
    grad_value = random_tensor(rng, (64,), "float32")
    var_before = held.copy()
    (out,) = session.run_graph(0, [m_buffer, grad_value])
    assert session._variables["w"].ctypes.data == address  # the Variable's own buffer was written
    assert m_buffer.ctypes.data == m_address and not np.array_equal(m_buffer, m_before)  # RefData: in place
    want_var, want_m = var_before.copy(), m_before.copy()
    kernels.inplace_apply_power_sign(want_var, want_m, np.float32(0.1), np.float32(1.0), np.float32(1.0),
                                     np.float32(0.9), grad_value)
    np.testing.assert_array_equal(out, want_var)
    np.testing.assert_array_equal(m_buffer, want_m)
    out[:] = 0  # the returned array is a copy
    np.testing.assert_array_equal(session.get_variables(["w"])[0], want_var)
    session.set_variables({"w": np.zeros(64, np.float32)})
    assert session._variables["w"].ctypes.data == address
    with pytest.raises(ValueError, match="float32"):
        session.set_variables({"w": np.zeros(64, np.float64)})
    with pytest.raises(KeyError, match="no Variable 'x'"):
        session.get_variables(["x"])
    with pytest.raises(TypeError, match="input 1 .* has dtype float64"):
        session.run_graph(0, [m_buffer, grad_value.astype(np.float64)])
    with pytest.raises(ValueError, match="takes 2 inputs"):
        session.run_graph(0, [m_buffer])
    with pytest.raises(ValueError, match="RefData.*writable"):
        session.run_graph(0, [list(m_buffer), grad_value])


def test_variables_are_shared_by_name_across_graphs():
    graphs = []
    for k in range(2):
        graph = graph_ir.Graph(f"g{k}")
        with graph:
            w = graph_ir.Variable("w", np.ones(4, np.float32))
            m = graph_ir.Variable("w_m", np.zeros(4, np.float32))
            ops.InplaceApplyPowerSign(w, m, 0.5, 0.0, 1.0, 0.0, np.full(4, 1.0, np.float32))
            graph.set_outputs([])
        graphs.append(graph)
    session = graph_ir.Session()
    for k, g in enumerate(graphs):
        session.add_graph(k, g)
    session.run_graph(0)
    session.run_graph(1)
    np.testing.assert_array_equal(session.get_variables(["w"])[0], np.zeros(4, np.float32))  # 1 - 0.5 - 0.5


@pytest.mark.parametrize("script", ["test_geir_inplace_apply_power_sign.py", "test_aclnn_apply_fused_ema_adam.py"])
@pytest.mark.parametrize("dtype", ["float32", pytest.param("float16", marks=pytest.mark.slow),
                                   pytest.param("bfloat16", marks=pytest.mark.slow)])
def test_examples_pass(script, dtype, tmp_path):
    args = [sys.executable, os.path.join(ROOT, "examples", script), "--dtype", dtype]
    if "geir" in script:
        args += ["--out", str(tmp_path)]
    result = subprocess.run(args, check=False, cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.rstrip().endswith("PASS")
    if "geir" in script:
        assert graph_ir.load(str(tmp_path / "tc_ge_irrun_test.air")).nodes_of_type("InplaceApplyPowerSign")
