"""Hostile-input fuzzing (hypothesis) of the four raw ops.

The property: a call either raises a TF error (InvalidArgument / FailedPrecondition) or TypeError / ValueError, and
leaves every variable bitwise unchanged; or it succeeds, and matches the float64 reference where the inputs are
moderate. The process never dies. Inputs cover every TF dtype for each argument, ranks 0 to 9, empty and
mismatched shapes, scalars of shape [2] or [1, 1], NaN, Inf, huge and subnormal values, uninitialized variables,
handles of another dtype or shape, every integer dtype and extreme values for step, and attributes out of range.
CI runs a bounded number of cases; `pytest -m slow` runs many more.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import strategies as st
from tensorflow.python.ops import resource_variable_ops

import tf_plugin
from op_spec import reference
from tests.helpers.fuzzing import (
    FLOATS,
    INTS,
    OTHER,
    REF_CASES,
    REF_SLOW_CASES,
    arrays,
    fuzz,
    moderate,
    same_bits,
    shapes,
)

TF_ERRORS = (tf.errors.InvalidArgumentError, tf.errors.FailedPreconditionError, TypeError, ValueError)


def _run_ref(values: list, uninit: int | None, build_op, check=None) -> str:
    """The ref-variable form of the property, in a tf.compat.v1 Session: ref variables from `values` (all but index
    `uninit` initialized), the op from build_op(variables); an error at graph build or run leaves every variable
    bitwise unchanged; on success, check(results) if given."""
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        variables = [tf.compat.v1.Variable(x, use_resource=False) for x in values]
        sess.run([v.initializer for k, v in enumerate(variables) if k != uninit])
        try:
            op = build_op(variables)
        except TF_ERRORS:
            return "error"  # rejected while building the graph: nothing ran
        before = [sess.run(v) if k != uninit else None for k, v in enumerate(variables)]
        try:
            sess.run(op)
        except TF_ERRORS:
            for v, b in zip(variables, before):
                if b is not None:
                    same_bits(sess.run(v), b)
            return "error"
        if check is not None:
            check([sess.run(v) for v in variables])
        return "ok"


def _variable(value: np.ndarray, uninitialized: bool):
    if uninitialized:
        return resource_variable_ops.UninitializedVariable(shape=value.shape, dtype=tf.as_dtype(value.dtype))
    return tf.Variable(value)


def _snapshot(variables) -> list:
    out = []
    for v in variables:
        try:
            out.append(v.numpy().copy())
        except tf.errors.FailedPreconditionError:
            out.append(None)
    return out


def _assert_unchanged(variables, before):
    for v, b in zip(variables, before):
        if b is not None:
            same_bits(v.numpy(), b)


@st.composite
def power_sign_case(draw):
    dtype = draw(st.sampled_from(FLOATS + OTHER[:3] + ["complex64"]))
    shape = draw(shapes)
    mutate = draw(st.sampled_from(["none"] * 6 + ["m_dtype", "grad_dtype", "grad_shape", "m_shape", "scalar_shape",
                                                  "scalar_dtype", "uninit"]))
    m_dtype = draw(st.sampled_from(FLOATS + OTHER)) if mutate == "m_dtype" else dtype
    grad_dtype = draw(st.sampled_from(FLOATS + OTHER)) if mutate == "grad_dtype" else dtype
    grad_shape = draw(shapes) if mutate == "grad_shape" else shape
    m_shape = draw(shapes) if mutate == "m_shape" else shape
    scalar_shapes = [draw(st.sampled_from([(), (1,)])) for _ in range(4)]
    if mutate == "scalar_shape":
        scalar_shapes[draw(st.integers(0, 3))] = draw(st.sampled_from([(2,), (1, 1), (0,), (3, 1)]))
    scalar_dtypes = [dtype] * 4
    if mutate == "scalar_dtype":
        scalar_dtypes[draw(st.integers(0, 3))] = draw(st.sampled_from(FLOATS + OTHER))
    return {
        "var": draw(arrays(dtype, shape)), "m": draw(arrays(m_dtype, m_shape)),
        "grad": draw(arrays(grad_dtype, grad_shape)),
        "scalars": [draw(arrays(d, s)) for d, s in zip(scalar_dtypes, scalar_shapes)],
        "uninit": draw(st.sampled_from([None, "var", "m"])) if mutate == "uninit" else None,
        "use_locking": draw(st.booleans()),
    }


def _check_power_sign_result(case, var_out, m_out):
    var, m, grad = case["var"], case["m"], case["grad"]
    dtype = var.dtype
    lr, logbase, sign_decay, beta = (float(np.asarray(s, np.float64).reshape(-1)[0]) for s in case["scalars"])
    if not all(np.isfinite([lr, logbase, sign_decay, beta])) or max(map(abs, (lr, logbase, sign_decay, beta))) > 10:
        return
    want_var, want_m = reference.power_sign(var, m, lr, logbase, sign_decay, beta, grad)
    ok = moderate(var, m, grad)
    tol = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-12}[reference_name(dtype)]
    v64, m64, g64 = (np.abs(np.asarray(x, np.float64)) for x in (var, m, grad))
    # The scale of each sum's terms, so the rounding of a result that cancels is allowed: with |beta| > 1, m_t's
    # terms beta * m and (1 - beta) * grad are larger than |m| + |grad|.
    scales = (v64 + g64 * abs(lr) * np.exp(abs(logbase * sign_decay)) + 1e-30,
              abs(beta) * m64 + abs(1 - beta) * g64 + 1e-30)
    for got, want, scale in ((var_out, want_var, scales[0]), (m_out, want_m, scales[1])):
        _assert_matches(got, want, ok, tol, scale)


def _assert_matches(got: np.ndarray, want: np.ndarray, ok: np.ndarray, tol: float, scale: np.ndarray) -> None:
    """The op's result (stored in T) against the float64 reference on the `ok` elements: within tol * scale (plus T's
    subnormal step) where the reference fits in T, the matching Inf where it overflows T; the band around T's max,
    where rounding decides between the largest finite value and Inf, is not checked."""
    got64 = np.asarray(got, np.float64)
    t_max = float(ml_dtypes.finfo(got.dtype).max)
    fits = ok & (np.abs(want) <= t_max * (1 - 4 * tol))
    overflows = ok & (np.abs(want) >= t_max * (1 + 4 * tol))
    err = np.abs(got64 - want)
    # A result below T's smallest normal is stored on T's subnormal grid: half a subnormal step is the rounding.
    subnormal = float(ml_dtypes.finfo(got.dtype).smallest_subnormal)
    assert np.all(err[fits] <= tol * scale[fits] + subnormal), (err[fits].max(), tol)
    np.testing.assert_array_equal(got64[overflows], np.copysign(np.inf, want[overflows]))


def reference_name(dtype) -> str:
    return next(k for k, v in reference.NP_DTYPES.items() if np.dtype(v) == np.dtype(dtype))


def _run_power_sign(case):
    var = _variable(case["var"], case["uninit"] == "var")
    m = _variable(case["m"], case["uninit"] == "m")
    before = _snapshot([var, m])
    lr, logbase, sign_decay, beta = (tf.constant(s) for s in case["scalars"])
    try:
        tf_plugin.raw_ops.ResourceApplyPowerSign(var=var, m=m, lr=lr, logbase=logbase, sign_decay=sign_decay,
                                                 beta=beta, grad=tf.constant(case["grad"]),
                                                 use_locking=case["use_locking"])
    except TF_ERRORS:
        _assert_unchanged([var, m], before)
        return "error"
    _check_power_sign_result(case, var.numpy(), m.numpy())
    return "ok"


@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["bounded", "slow"])
def test_fuzz_resource_power_sign(slow):
    outcomes = fuzz(power_sign_case(), _run_power_sign, slow)
    assert "ok" in outcomes and "error" in outcomes  # both sides of the property were exercised


def _run_power_sign_ref(case):
    """The ref op in a tf.compat.v1 graph: the same property."""
    lr, logbase, sign_decay, beta = case["scalars"]
    return _run_ref(
        [case["var"], case["m"]], {"var": 0, "m": 1}.get(case["uninit"]),
        lambda vs: tf_plugin.raw_ops.ApplyPowerSign(var=vs[0], m=vs[1], lr=lr, logbase=logbase,
                                                    sign_decay=sign_decay, beta=beta, grad=case["grad"],
                                                    use_locking=case["use_locking"]),
        lambda results: _check_power_sign_result(case, *results))


@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["bounded", "slow"])
def test_fuzz_ref_power_sign(slow):
    assert "error" in fuzz(power_sign_case(), _run_power_sign_ref, slow, REF_CASES, REF_SLOW_CASES)


@st.composite
def fused_case(draw):
    dtype = draw(st.sampled_from(FLOATS + ["int32"]))
    shape = draw(shapes)
    mutate = draw(st.sampled_from(["none"] * 6 + ["state_dtype", "state_shape", "grad_shape", "step", "lr", "attr",
                                                  "uninit"]))
    state_dtypes = [dtype] * 4
    state_shapes = [shape] * 4
    if mutate == "state_dtype":
        state_dtypes[draw(st.integers(0, 3))] = draw(st.sampled_from(FLOATS + OTHER))
    if mutate == "state_shape":
        state_shapes[draw(st.integers(0, 3))] = draw(shapes)
    step_dtype = draw(st.sampled_from(INTS)) if mutate == "step" else "int64"
    step_value = draw(st.sampled_from([-(2**31), -1, 0, 1, 2, 1000, 2**31 + 5, 2**62])) if mutate == "step" else \
        draw(st.integers(1, 10**6))
    step_shape = draw(st.sampled_from([(), (1,), (2,), (1, 1)])) if mutate == "step" else ()
    lr = draw(st.sampled_from([np.nan, np.inf, -1.0, 0.0, 1e30])) if mutate == "lr" else \
        draw(st.floats(1e-5, 0.1))
    attrs = {"ema_decay": 0.9, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "mode": draw(st.sampled_from([0, 1])),
             "bias_correction": draw(st.booleans()), "weight_decay": 0.01}
    if mutate == "attr":
        key = draw(st.sampled_from(["ema_decay", "beta1", "beta2", "eps", "mode", "weight_decay"]))
        attrs[key] = draw(st.sampled_from({"mode": [-1, 2, 7]}.get(key, [-0.5, 1.0, 1.5, np.nan, np.inf, 0.0])))
    return {
        "grad": draw(arrays(dtype, draw(shapes) if mutate == "grad_shape" else shape)),
        "state": [draw(arrays(d, s)) for d, s in zip(state_dtypes, state_shapes)],
        "step": np.full(step_shape, step_value).astype(np.dtype(step_dtype)) if step_shape else
        np.array(step_value).astype(np.dtype(step_dtype)),
        "lr": np.float32(lr), "attrs": attrs,
        "uninit": draw(st.integers(0, 3)) if mutate == "uninit" else None,
    }


def _run_fused(case):
    state = [_variable(x, case["uninit"] == k) for k, x in enumerate(case["state"])]
    before = _snapshot(state)
    try:
        with np.errstate(all="ignore"):
            tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(
                var=state[0], m=state[1], v=state[2], s=state[3], grad=tf.constant(case["grad"]),
                step=tf.constant(case["step"]), lr=tf.constant(case["lr"]), **case["attrs"])
    except TF_ERRORS:
        _assert_unchanged(state, before)
        return "error"
    a = case["attrs"]
    step = int(np.asarray(case["step"]).reshape(-1)[0])
    var, m, v, s = case["state"]
    with np.errstate(all="ignore"):
        want = reference.fused_ema_adam(case["grad"], var, m, np.abs(v), s, step=step, lr=float(case["lr"]),
                                        ema_decay=a["ema_decay"], beta1=a["beta1"], beta2=a["beta2"], eps=a["eps"],
                                        mode=a["mode"], bias_correction=a["bias_correction"],
                                        weight_decay=a["weight_decay"])
    ok = moderate(case["grad"], var, m, v, s) & (np.asarray(v, np.float64) >= 0)
    tol = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-4}[reference_name(var.dtype)]
    for got, w in zip((x.numpy() for x in state), want[:4]):
        _assert_matches(got, w, ok, tol * 10, np.abs(w) + 1.0)
    return "ok"


@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["bounded", "slow"])
def test_fuzz_resource_fused_ema_adam(slow):
    outcomes = fuzz(fused_case(), _run_fused, slow)
    assert "ok" in outcomes and "error" in outcomes


def _run_fused_ref(case):
    return _run_ref(
        case["state"], case["uninit"],
        lambda vs: tf_plugin.raw_ops.ApplyFusedEmaAdam(var=vs[0], m=vs[1], v=vs[2], s=vs[3], grad=case["grad"],
                                                       step=case["step"], lr=case["lr"], **case["attrs"]))


@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["bounded", "slow"])
def test_fuzz_ref_fused_ema_adam(slow):
    assert "error" in fuzz(fused_case(), _run_fused_ref, slow, REF_CASES, REF_SLOW_CASES)
