"""The multi-tensor ops against the single-tensor ops: bitwise, per variable, on lists that mix sizes 0, 1, odd and
1M, for each dtype; their checks (everything refused before anything is written); and three FusedEmaAdam steps
against float64."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import op_spec
from op_spec import reference
from tf_plugin import raw_ops

SHAPES = [(0,), (1,), (7, 3), (1 << 20,), (5,), (1, 1), (33, 17)]
BITS = {"float16": np.uint16, "bfloat16": np.uint16, "float32": np.uint32, "float64": np.uint64}


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(BITS[str(x.dtype)])


def _split(flat: np.ndarray, shapes) -> list[np.ndarray]:
    sizes = [int(np.prod(s)) for s in shapes]
    return [p.reshape(s) for p, s in zip(np.split(flat, np.cumsum(sizes)[:-1]), shapes)]


def _state(rng, dtype: str, slots: int):
    """Per-variable values, grads and `slots` flat state arrays (v non-negative)."""
    values = [reference.random_tensor(rng, s, dtype) for s in SHAPES]
    grads = [reference.random_tensor(rng, s, dtype) for s in SHAPES]
    total = sum(int(np.prod(s)) for s in SHAPES)
    flat = [reference.random_tensor(rng, (total,), dtype) for _ in range(slots)]
    if slots == 3:
        flat[1] = np.abs(flat[1])
    return values, grads, flat


@pytest.mark.parametrize("dtype", op_spec.MULTI_POWER_SIGN.dtypes)
def test_multi_power_sign_is_bitwise_the_single_op(dtype):
    rng = np.random.default_rng(7)
    values, grads, (m,) = _state(rng, dtype, 1)
    variables, flat_m = [tf.Variable(v) for v in values], tf.Variable(m)
    singles = [(tf.Variable(v), tf.Variable(p)) for v, p in zip(values, _split(m, SHAPES))]
    for step in range(2):
        scalars = {"lr": 0.05, "logbase": 0.7, "sign_decay": 1.0 - 0.3 * step, "beta": 0.9}
        raw_ops.ResourceApplyMultiPowerSign(vars=variables, m=flat_m, grads=grads, **scalars)
        for (var, m_k), g in zip(singles, grads):
            raw_ops.ResourceApplyPowerSign(var=var, m=m_k, grad=g, **scalars)
    for var, m_part, (want_var, want_m) in zip(variables, _split(flat_m.numpy(), SHAPES), singles):
        np.testing.assert_array_equal(_bits(var.numpy()), _bits(want_var.numpy()))
        np.testing.assert_array_equal(_bits(m_part), _bits(want_m.numpy()))


@pytest.mark.parametrize("dtype", op_spec.MULTI_FUSED_EMA_ADAM.dtypes)
@pytest.mark.parametrize("mode", [0, 1])
def test_multi_fused_ema_adam_is_bitwise_the_single_op(dtype, mode):
    rng = np.random.default_rng(11)
    values, grads, flat = _state(rng, dtype, 3)
    variables, flat_vars = [tf.Variable(v) for v in values], [tf.Variable(x) for x in flat]
    singles = [[tf.Variable(v), *(tf.Variable(p) for p in parts)]
               for v, *parts in zip(values, *(_split(x, SHAPES) for x in flat))]
    no_decay = [1, 3]  # e.g. Keras's exclude_from_weight_decay
    attrs = {"ema_decay": 0.99, "beta1": 0.8, "beta2": 0.95, "eps": 1e-6, "mode": mode}
    for step in (1, 2, 3):
        raw_ops.ResourceApplyMultiFusedEmaAdam(vars=variables, m=flat_vars[0], v=flat_vars[1], s=flat_vars[2],
                                               grads=grads, step=step, lr=0.01 * step, weight_decay=0.02,
                                               no_decay=no_decay, **attrs)
        for k, (state, g) in enumerate(zip(singles, grads)):
            raw_ops.ResourceApplyFusedEmaAdam(var=state[0], m=state[1], v=state[2], s=state[3], grad=g, step=step,
                                              lr=0.01 * step, weight_decay=0.0 if k in no_decay else 0.02, **attrs)
    parts = [_split(x.numpy(), SHAPES) for x in flat_vars]
    for k, (var, state) in enumerate(zip(variables, singles)):
        np.testing.assert_array_equal(_bits(var.numpy()), _bits(state[0].numpy()))
        for slot in range(3):
            np.testing.assert_array_equal(_bits(parts[slot][k]), _bits(state[slot + 1].numpy()))


def test_state_offsets_update_a_subset_and_keep_the_rest():
    rng = np.random.default_rng(3)
    values, grads, (m,) = _state(rng, "float32", 1)
    variables, flat_m = [tf.Variable(v) for v in values], tf.Variable(m)
    starts = np.cumsum([0] + [int(np.prod(s)) for s in SHAPES])[:-1]
    chosen = [6, 2, 3]  # out of order; the others have no gradient this step
    raw_ops.ResourceApplyMultiPowerSign(vars=[variables[k] for k in chosen], m=flat_m, grads=[grads[k] for k in chosen],
                                        lr=0.1, logbase=0.5, sign_decay=1.0, beta=0.9,
                                        state_offsets=[int(starts[k]) for k in chosen])
    for k, (var, m_part) in enumerate(zip(variables, _split(flat_m.numpy(), SHAPES))):
        want_var, want_m = tf.Variable(values[k]), tf.Variable(_split(m, SHAPES)[k])
        if k in chosen:
            raw_ops.ResourceApplyPowerSign(var=want_var, m=want_m, grad=grads[k], lr=0.1, logbase=0.5, sign_decay=1.0,
                                           beta=0.9)
        np.testing.assert_array_equal(_bits(var.numpy()), _bits(want_var.numpy()))
        np.testing.assert_array_equal(_bits(m_part), _bits(want_m.numpy()))


def _power_sign_call(variables, flat_m, grads, **extra):
    raw_ops.ResourceApplyMultiPowerSign(vars=variables, m=flat_m, grads=grads, lr=0.1, logbase=0.5, sign_decay=1.0,
                                        beta=0.9, **extra)


@pytest.mark.parametrize("case,match", [
    ("duplicate", r"vars\[0\] and vars\[2\] are the same variable"),
    ("flat_is_var", r"vars\[1\] and m are the same variable"),
    ("short_flat", r"m must be a flat variable of shape \[12\].*got \[11\]"),
    ("grad_shape", r"vars\[1\] and grads\[1\] do not have the same shape"),
    ("dtype", r"vars\[2\] is a variable of dtype (double|float64) but the op's T is (float|float32)"),
    ("overlap", r"the state of vars\[0\] and vars\[1\] overlap"),
    ("outside", r"state_offsets\[2\] = 10: vars\[2\]'s 4 elements do not fit"),
])
@pytest.mark.parametrize("xla", [False, True], ids=["fused", "portable"])
def test_bad_calls_are_refused_before_anything_is_written(case, match, xla):
    shapes = [(3,), (5,), (4,)]
    values = [np.arange(np.prod(s), dtype=np.float32).reshape(s) + 1 for s in shapes]
    variables = [tf.Variable(v) for v in values]
    grads = [tf.ones(s) for s in shapes]
    flat_m = tf.Variable(np.ones(12, np.float32))
    extra = {}
    if case == "duplicate":
        variables[2] = variables[0]
        grads[2] = grads[0]
    elif case == "flat_is_var":
        flat_m = variables[1]
    elif case == "short_flat":
        flat_m = tf.Variable(np.ones(11, np.float32))
    elif case == "grad_shape":
        grads[1] = tf.ones((6,))
    elif case == "dtype":
        variables[2] = tf.Variable(values[2].astype(np.float64))
    elif case == "overlap":
        extra = {"state_offsets": [0, 2, 8]}
    elif case == "outside":
        extra = {"state_offsets": [0, 3, 10]}
    before = [v.numpy().copy() for v in (*variables, flat_m)]
    if xla:  # the portable path (inside XLA) makes the same checks, in Python, when the step is traced
        call = tf.function(lambda: _power_sign_call(variables, flat_m, grads, **extra), jit_compile=True)
    else:
        call = lambda: _power_sign_call(variables, flat_m, grads, **extra)
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match=match):
        call()
    for v, b in zip((*variables, flat_m), before):
        np.testing.assert_array_equal(v.numpy(), b)


def test_three_fused_ema_adam_steps_match_float64_within_1e5():
    """lr 0.1, 0.01, 0.5 from fresh state: the bias corrections in float64 keep var within 1e-5 of float64."""
    rng = np.random.default_rng(5)
    shapes = [(1000,), (257, 3), (1,)]
    values = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    total = sum(int(np.prod(s)) for s in shapes)
    variables = [tf.Variable(v) for v in values]
    flat = [tf.Variable(np.zeros(total, np.float32)), tf.Variable(np.zeros(total, np.float32)),
            tf.Variable(np.concatenate([v.ravel() for v in values]))]
    attrs = {"ema_decay": 0.9, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "mode": 1, "bias_correction": True,
             "weight_decay": 0.01}
    want = [[v.astype(np.float64), np.zeros(v.shape), np.zeros(v.shape), v.astype(np.float64)] for v in values]
    for step, lr in enumerate((0.1, 0.01, 0.5), start=1):
        grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        raw_ops.ResourceApplyMultiFusedEmaAdam(vars=variables, m=flat[0], v=flat[1], s=flat[2], grads=grads,
                                               step=step, lr=lr, **attrs)
        want = [list(reference.fused_ema_adam(g, *w, step=step, lr=lr, **attrs)[:4]) for g, w in zip(grads, want)]
    s_parts = _split(flat[2].numpy(), shapes)
    for var, s, (w_var, _, _, w_s) in zip(variables, s_parts, want):
        for got, ref in ((var.numpy(), w_var), (s, w_s)):
            assert np.max(np.abs(got - ref)) <= 1e-5 * np.max(np.abs(ref))
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.max(np.abs(ref)) * 1e-1)
