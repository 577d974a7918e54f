"""One table of hostile multi-tensor calls through both paths: the fused kernel (eager) and the portable path
(under XLA, jit_compile=True). Each call is refused by both with an InvalidArgumentError of the same message, and
nothing is written."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf

import tf_plugin

ADAM = tf_plugin.raw_ops.ResourceApplyMultiFusedEmaAdam


def _state():
    """Two model variables (2x3 and 4 elements) and the flat m, v, s of their 10 elements."""
    x, y = tf.Variable(np.ones((2, 3), np.float32)), tf.Variable(np.ones(4, np.float32))
    m, v, s = (tf.Variable(np.zeros(10, np.float32)) for _ in range(3))
    return x, y, m, v, s


def _grads():
    return [tf.ones((2, 3)), tf.ones(4)]


# name -> (the call's keyword arguments from the state, a regex of the message both paths give)
CASES = {
    "variable-and-its-handle": (lambda x, y, m, v, s: {"vars": [x, x.handle]},
                                r"vars\[0\] and vars\[1\] are the same variable"),
    "flat-state-is-a-var": (lambda x, y, m, v, s: {"m": y}, r"vars\[1\] and m are the same variable"),
    "no_decay-beyond-N": (lambda x, y, m, v, s: {"no_decay": [5]}, "no_decay holds 5, not an index into the N = 2"),
    "no_decay-negative": (lambda x, y, m, v, s: {"no_decay": [-1]}, "no_decay holds -1, not an index into the N = 2"),
    "state_offsets-length": (lambda x, y, m, v, s: {"state_offsets": [0]}, "state_offsets has 1 entries, expected N = 2"),
    "state_offsets-overflow": (lambda x, y, m, v, s: {"state_offsets": [0, 2**64]},
                               r"state_offsets\[1\] = 18446744073709551616 does not fit in int64"),
    "state_offsets-outside": (lambda x, y, m, v, s: {"state_offsets": [0, 8]},
                              r"state_offsets\[1\] = 8: vars\[1\]'s 4 elements do not fit in the flat state of 10"),
    "state_offsets-overlap": (lambda x, y, m, v, s: {"state_offsets": [0, 4]},
                              r"state_offsets: the state of vars\[0\] and vars\[1\] overlap"),
    "flat-state-2d": (lambda x, y, m, v, s: {"m": tf.Variable(np.zeros((2, 5), np.float32))},
                      r"m must be a flat variable of shape \[10\] \(the elements of all N variables\), got \[2,5\]"),
    "flat-state-size": (lambda x, y, m, v, s: {"v": tf.Variable(np.zeros(11, np.float32))},
                        r"v must be a flat variable of shape \[10\]"),
    "variable-dtype": (lambda x, y, m, v, s: {"vars": [x, tf.Variable(np.ones(4, np.float64))]},
                       r"vars\[1\] is a variable of dtype double but the op's T is float"),
    "grad-shape": (lambda x, y, m, v, s: {"grads": [tf.ones((3, 2)), tf.ones(4)]},
                   r"vars\[0\] and grads\[0\] do not have the same shape\[2,3\] \[3,2\]"),
}


def _call(kwargs_of, state):
    x, y, m, v, s = state
    kwargs = {"vars": [x, y], "m": m, "v": v, "s": s, "grads": _grads(), "step": 1, "lr": 0.1}
    kwargs.update(kwargs_of(*state))
    ADAM(**kwargs)


@pytest.mark.parametrize("name", list(CASES))
def test_both_paths_refuse_alike_and_write_nothing(name):
    kwargs_of, message = CASES[name]
    messages = []
    for path in ("fused", "portable"):
        state = _state()
        before = [v.numpy().copy() for v in state]
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            if path == "fused":
                _call(kwargs_of, state)
            else:
                tf.function(lambda state=state: _call(kwargs_of, state), jit_compile=True)()
        text = info.value.message if hasattr(info.value, "message") else str(info.value)
        found = re.search(message, text)
        assert found, (path, text)
        messages.append(found.group(0))
        for got, want in zip(state, before):
            np.testing.assert_array_equal(got.numpy(), want)
    assert messages[0] == messages[1]


def test_plain_handles_are_accepted_on_both_paths():
    for path in ("fused", "portable"):
        x, y, m, v, s = _state()

        def step(x=x, y=y, m=m, v=v, s=s):
            ADAM(vars=[x.handle, y.handle], m=m.handle, v=v.handle, s=s.handle, grads=_grads(), step=1, lr=0.1)

        (step if path == "fused" else tf.function(step, jit_compile=True))()
        np.testing.assert_allclose(x.numpy(), 1 - 0.1, rtol=1e-6)


def test_a_grad_of_another_dtype_blames_grad():
    var, m = tf.Variable(np.ones(3, np.float32)), tf.Variable(np.zeros(3, np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="grad has dtype float64, but var is a variable of dtype "
                                                             "float32"):
        tf_plugin.raw_ops.ResourceApplyPowerSign(var=var, m=m, lr=0.1, logbase=1.0, sign_decay=1.0, beta=0.9,
                                                 grad=np.ones(3, np.float64))
