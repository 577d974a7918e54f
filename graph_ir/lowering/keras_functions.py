"""Keras's own step functions (model.train_function, test_function, predict_function; Keras 3's TensorFlow trainer):
what model.fit runs, lowered on the batch the user describes.

Keras builds them in TensorFlowTrainer._make_function (keras/src/backend/tensorflow/trainer.py): `function(iterator)`
calls the tf.function `multi_step_on_iterator`, which takes the next batch from the iterator and runs the
tf.function `one_step_on_data(data)` (the model's train_step under its distribution strategy) once per step of
`steps_per_execution`. An iterator cannot be an argument of a GE graph and the loop over steps is control flow, so
what is lowered is `one_step_on_data` on the batch: one step of fit, the graph run once per batch.
"""

from __future__ import annotations

import inspect
from typing import Any

import tensorflow as tf

from graph_ir.ir.errors import LoweringError

_MADE_BY = "_make_function.<locals>."
_HOW = ("pass the batch's specs: graph_ir.from_tensorflow(model.train_function, (tf.TensorSpec(x_shape, x_dtype), "
        "tf.TensorSpec(y_shape, y_dtype))), or a tf.data.Dataset of batches with a static batch size (batch(n, "
        "drop_remainder=True)); or pass a tf.function of model.train_step with a tf.TensorSpec per batch tensor: "
        "tf.function(lambda x, y: model.train_step((x, y)))")


def _python_function(fn: Any) -> Any:
    """The Python function behind `fn`, under tf.function and decorators (Keras's do_not_convert)."""
    return inspect.unwrap(getattr(fn, "python_function", fn))


def is_keras_step_function(fn: Any) -> bool:
    """Whether `fn` is one of the functions Keras's TensorFlow trainer makes (model.train_function, ...)."""
    python = _python_function(fn)
    return _MADE_BY in getattr(python, "__qualname__", "") and "one_step_on_data" in getattr(
        getattr(python, "__code__", None), "co_freevars", ())


def _one_step_on_data(fn: Any) -> Any:
    python = _python_function(fn)
    cells = dict(zip(python.__code__.co_freevars, (c.cell_contents for c in python.__closure__ or ())))
    step = cells["one_step_on_data"]
    if not hasattr(step, "get_concrete_function"):  # the wrapper Keras puts around it (_autoconvert_optionals)
        step = getattr(step, "__wrapped__", step)
    if not hasattr(step, "get_concrete_function"):  # run_eagerly=True: a plain Python function
        step = tf.function(step)
    return step


def _batch(args: tuple) -> Any:
    """The batch structure the user gave: specs or tensors, a tf.data.Dataset or an iterator (their element_spec)."""
    if len(args) == 1:
        given = args[0]
        spec = getattr(given, "element_spec", None)
        return spec if spec is not None else given
    return tuple(args)


def keras_step(fn: Any, args: tuple) -> tuple[Any, tuple]:
    """The tf.function and arguments to lower for Keras's step function `fn` called on batches like `args`."""
    if not args:
        raise LoweringError("this is Keras's step function (model.train_function, as model.make_train_function() "
                            "makes it): it takes a dataset iterator, which a GE graph cannot take. To lower one step "
                            f"of fit, {_HOW}")
    return _one_step_on_data(fn), (_batch(args),)


def not_a_function_hint(fn: Any) -> str:
    """Advice for an object from_tensorflow cannot take (a Keras model, its train_step method)."""
    owner = getattr(fn, "__self__", None)
    if owner is not None and hasattr(owner, "train_step") and callable(fn):
        return f"; to lower a Keras model's step, {_HOW}"
    if hasattr(fn, "train_step") and hasattr(fn, "make_train_function"):
        return f"; for a Keras model, pass model.train_function and {_HOW[5:]}"
    return ""
