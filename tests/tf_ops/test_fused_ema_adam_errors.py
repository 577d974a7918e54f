"""FusedEmaAdam ops: every bad input is a clear error that leaves every variable bitwise unchanged; attribute
errors surface when the graph is built."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.fused_ema_adam import HYPER, apply, check_one_step


def _fresh(shapes=((3,),) * 4, dtypes=("float32",) * 4):
    values = [np.array([1.0, -2.0, 3.0]), np.array([0.5, 0.0, -1.0]), np.array([0.1, 0.0, 2.0]),
              np.array([1.0, -1.5, 2.5])]
    return [tf.Variable(np.resize(x, s).astype(d)) for x, s, d in zip(values, shapes, dtypes)]


G3 = np.array([0.3, -0.2, 0.0], np.float32)
RUNTIME_BAD = {
    "grad shape": ({"grad": np.ones(4, np.float32)}, "var and grad do not have the same shape"),
    "grad half": ({"grad": np.ones(3, np.float16)}, "grad has dtype float16, but var is a variable of dtype float32"),
    "grad float64": ({"grad": np.ones(3, np.float64)}, "grad has dtype float64; expected one of"),
    "int grad": ({"grad": np.ones(3, np.int32)}, "grad has dtype int32"),
    "step [2]": ({"step": np.array([1, 2], np.int64)}, "step is not a scalar"),
    "step [1,1]": ({"step": np.ones((1, 1), np.int64)}, "step is not a scalar"),
    "step int32": ({"step": tf.constant(3, tf.int32)}, "step has dtype int32, expected int64"),
    "step 0": ({"step": 0}, "step must be >= 1 when bias_correction is true, got 0"),
    "step -5": ({"step": -5}, "step must be >= 1"),
    "lr [2]": ({"lr": np.ones(2, np.float32)}, "lr is not a scalar"),
    "lr nan": ({"lr": float("nan")}, "lr must be finite"),
    "lr inf": ({"lr": float("inf")}, "lr must be finite"),
    "lr float64": ({"lr": tf.constant(0.1, tf.float64)}, "lr has dtype float64, expected float"),
}
ATTR_BAD = {
    "mode 2": ({"mode": 2}, "mode must be 0 .L2. or 1 .AdamW., got 2"),
    "beta1 1": ({"beta1": 1.0}, r"beta1 must be in \[0, 1\), got 1"),
    "beta2 -0.1": ({"beta2": -0.1}, r"beta2 must be in \[0, 1\)"),
    "ema_decay 1": ({"ema_decay": 1.0}, r"ema_decay must be in \[0, 1\)"),
    "ema_decay nan": ({"ema_decay": float("nan")}, r"ema_decay must be in \[0, 1\)"),
    "eps 0": ({"eps": 0.0}, "eps must be a finite number > 0, got 0"),
    "eps inf": ({"eps": float("inf")}, "eps must be a finite number > 0"),
    "weight_decay -0.1": ({"weight_decay": -0.1}, "weight_decay must be a finite number >= 0"),
}


@pytest.mark.parametrize("case", list(RUNTIME_BAD) + list(ATTR_BAD), ids=str)
def test_bad_input_raises_and_leaves_variables(case):
    override, message = {**RUNTIME_BAD, **ATTR_BAD}[case]
    variables = _fresh()
    before = [x.numpy().copy() for x in variables]
    args = {"grad": G3, "step": 1, "lr": 0.1, **override}
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        apply(variables, **args)
    for x, b in zip(variables, before):
        np.testing.assert_array_equal(x.numpy(), b)


@pytest.mark.parametrize("which", [1, 2, 3])
def test_state_shape_or_dtype_mismatch_leaves_variables(which):
    name = "mvs"[which - 1]
    for shapes, dtypes, message in [
        (tuple((4,) if k == which else (3,) for k in range(4)), ("float32",) * 4,
         f"var and {name} do not have the same shape"),
        (((3,),) * 4, tuple("float16" if k == which else "float32" for k in range(4)),
         f"{name} is a variable of dtype half"),
    ]:
        variables = _fresh(shapes, dtypes)
        before = [x.numpy().copy() for x in variables]
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            apply(variables, G3, 1, 0.1)
        for x, b in zip(variables, before):
            np.testing.assert_array_equal(x.numpy(), b)


def test_step_below_one_is_fine_without_bias_correction():
    variables = _fresh()
    before = [x.numpy().copy() for x in variables]
    apply(variables, G3, 0, 0.1, bias_correction=False, **HYPER)
    check_one_step([x.numpy() for x in variables], before, G3, "float32", 0, 0.1,
                   {**HYPER, "mode": 1, "bias_correction": False, "weight_decay": 0.0})


def test_uninitialized_variable_is_failed_precondition():
    variables = _fresh()
    variables[2] = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[3], shared_name="never_assigned_v")
    with pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized"):
        apply(variables, G3, 1, 0.1)
    np.testing.assert_array_equal(variables[0].numpy(), [1.0, -2.0, 3.0])


@pytest.mark.parametrize("case", ["mode 2", "beta1 1", "eps 0"])
def test_attribute_errors_surface_at_graph_build(case):
    override, message = ATTR_BAD[case]
    variables = _fresh()

    @tf.function
    def f():
        apply(variables, G3, 1, 0.1, **override)

    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match=message):
        f.get_concrete_function()


def test_step_shape_rejected_at_graph_build():
    variables = _fresh()

    @tf.function
    def f(step):
        apply(variables, G3, step, 0.1)

    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match="step"):
        f.get_concrete_function(tf.TensorSpec([2], tf.int64))
