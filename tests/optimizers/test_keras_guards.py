"""What the Keras optimizers refuse before writing anything, in both layouts: variables of a dtype their op does not
register (at build, named), a gradient of the wrong shape in any dtype group (no group written, iterations
unchanged), the same variable twice in one call, variables they do not own (ema_variable, swap_ema_weights), and
non-scalar or non-numeric hyper-parameters."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from op_spec import FUSED_EMA_ADAM, POWER_SIGN
from tf_plugin.optimizers import FusedEmaAdam, PowerSign

LAYOUTS = pytest.mark.parametrize("flat", [True, False], ids=["flat", "per_variable"])
MAKERS = {"fused_ema_adam": (FusedEmaAdam, FUSED_EMA_ADAM), "powersign": (PowerSign, POWER_SIGN)}


def _mixed_model(second_dtype: str) -> keras.Model:
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(3, name="first")(inputs)
    out = keras.layers.Dense(2, dtype=second_dtype, name="second")(hidden)
    return keras.Model(inputs, out)


def _state(model, opt) -> list[np.ndarray]:
    return [np.asarray(w) for w in model.get_weights()] + [np.asarray(v) for v in opt.variables]


def _unchanged(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@LAYOUTS
@pytest.mark.parametrize("name", list(MAKERS))
def test_unsupported_dtype_is_refused_at_build_naming_the_variable(name, flat):
    cls, sig = MAKERS[name]
    unsupported = [d for d in ("float16", "bfloat16", "float32", "float64") if d not in sig.dtypes]
    supported = [d for d in ("float16", "float64") if d in sig.dtypes]
    for dtype in unsupported:
        model, opt = _mixed_model(dtype), cls(flat_state=flat)
        before = _state(model, opt)
        grads = [tf.ones_like(v) for v in model.trainable_variables]
        with pytest.raises(ValueError, match=rf"'second/kernel' \(shape \(3, 2\), {dtype}\).* supports "
                                             rf"{', '.join(sig.dtypes)}, not {dtype}"):
            opt.apply_gradients(zip(grads, model.trainable_variables))
        _unchanged(_state(model, opt), before)
        assert not opt.built and int(opt.iterations.numpy()) == 0
    for dtype in supported:  # what op_spec declares trains
        model, opt = _mixed_model(dtype), cls(flat_state=flat)
        opt.apply_gradients(zip([tf.ones_like(v) for v in model.trainable_variables], model.trainable_variables))
        assert int(opt.iterations.numpy()) == 1


@LAYOUTS
@pytest.mark.parametrize("name", list(MAKERS))
def test_a_bad_gradient_in_any_group_writes_no_group(name, flat):
    model, opt = _mixed_model("float16"), MAKERS[name][0](flat_state=flat)
    opt.build(model.trainable_variables)
    before = _state(model, opt)
    grads = [tf.ones_like(v) for v in model.trainable_variables]
    grads[-2] = tf.ones((2, 3), tf.float16)  # the float16 group's kernel, transposed
    with pytest.raises(ValueError, match=r"gradient of variable 'second/kernel' .* has shape \(2, 3\); expected "
                                         r"\(3, 2\)\. Nothing was updated"):
        opt.apply_gradients(zip(grads, model.trainable_variables))
    _unchanged(_state(model, opt), before)

    @tf.function(input_signature=[tf.TensorSpec(None, tf.float32), tf.TensorSpec(None, tf.float16)])
    def step(first, second):  # shapes known only when the step runs
        dynamic = list(grads)
        dynamic[0], dynamic[-2] = first, second
        opt.apply_gradients(zip(dynamic, model.trainable_variables))

    with pytest.raises(tf.errors.InvalidArgumentError, match="gradient_shape_of_second_kernel"):
        step(tf.ones((4, 3)), tf.ones((2, 3), tf.float16))
    _unchanged(_state(model, opt), before)
    step(tf.ones((4, 3)), tf.ones((3, 2), tf.float16))
    assert int(opt.iterations.numpy()) == 1


@LAYOUTS
@pytest.mark.parametrize("name", list(MAKERS))
def test_the_same_variable_twice_is_refused_in_both_layouts(name, flat):
    model, opt = _mixed_model("float32"), MAKERS[name][0](flat_state=flat)
    kernel = model.trainable_variables[0]
    for built in (False, True):
        if built:
            opt.build(model.trainable_variables)
        before = _state(model, opt)
        with pytest.raises(ValueError, match=r"got variable 'first/kernel' .* twice \(at positions 0 and 2\)"):
            opt.apply_gradients([(tf.ones((4, 3)), kernel), (tf.ones(3), model.trainable_variables[1]),
                                 (tf.ones((4, 3)), kernel)])
        _unchanged(_state(model, opt), before)
    with pytest.raises(ValueError, match="twice"):
        MAKERS[name][0](flat_state=flat).build([kernel, kernel])


@LAYOUTS
def test_ema_of_a_variable_the_optimizer_does_not_own(flat):
    model, other = _mixed_model("float32"), keras.Variable(np.ones(5, np.float32), name="stranger")
    opt = FusedEmaAdam(flat_state=flat)
    opt.build(model.trainable_variables[:2])
    owned = model.trainable_variables[0]
    before = [np.asarray(owned), np.asarray(opt.ema_variable(owned))]
    message = r"no state for variable 'stranger' \(shape \(5,\), float32\): it was built for 2 other variables"
    with pytest.raises(ValueError, match=message):
        opt.ema_variable(other)
    with pytest.raises(ValueError, match=message):
        opt.swap_ema_weights([owned, other])  # nothing swapped, not even the owned variable
    with pytest.raises(ValueError, match=r"no state for variable 'second/kernel'"):
        opt.ema_variable(model.trainable_variables[2])  # the model's, but not given to this optimizer
    _unchanged([np.asarray(owned), np.asarray(opt.ema_variable(owned))], before)


@pytest.mark.parametrize("cls, argument", [(FusedEmaAdam, a) for a in
                                           ("beta_1", "beta_2", "epsilon", "ema_decay", "weight_decay")] +
                         [(PowerSign, "beta"), (PowerSign, "base")])
def test_hyper_parameters_must_be_scalar_numbers(cls, argument):
    for value in (np.array([0.5, 0.5]), tf.constant([[0.5]])):
        with pytest.raises(ValueError, match=rf"{argument} must be a scalar \(one float\), got \w+ of shape"):
            cls(**{argument: value})
    with pytest.raises(TypeError, match=rf"{argument} must be a float, got str 'x'"):
        cls(**{argument: "x"})
    # Scalars of every kind are accepted: 0-d arrays and tensors, NumPy scalars.
    for value in (np.array(0.5), tf.constant(0.5), np.float32(0.5)):
        assert getattr(cls(**{argument: value}), argument if argument != "weight_decay" else "fused_weight_decay") \
            == 0.5
