"""TensorList values share one store of elements (graph_ir/executors/list_store.py) and keep TF's value semantics:
an old list value, forked, set, popped or read after newer values were written, holds what TF's holds (tf.raw_ops,
bitwise), in a loop too (versions far behind get a copy of their own); elements of several shapes in one list."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import Const
from graph_ir.executors import list_store
from tests.graph_ir.test_tensorlist_ops import _runs_in_graph_ir, _same, _values

F32 = tf.float32
SHAPE = tf.constant([2], tf.int32)


def _stack(handle, n):
    return tf.raw_ops.TensorListStack(input_handle=handle, element_shape=SHAPE, element_dtype=F32, num_elements=n)


def _get(handle, k, shape=SHAPE):
    return tf.raw_ops.TensorListGetItem(input_handle=handle, index=k, element_shape=shape, element_dtype=F32)


def _forks(x):
    """Sets, forked pushes, a pop then a push over the popped element, and reads of every older value after."""
    first = tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=SHAPE)
    once = tf.raw_ops.TensorListSetItem(input_handle=first, index=0, item=x[2] * 3)
    twice = tf.raw_ops.TensorListSetItem(input_handle=once, index=1, item=-x[0])
    left = tf.raw_ops.TensorListPushBack(input_handle=once, tensor=x[1] + 1)
    right = tf.raw_ops.TensorListPushBack(input_handle=once, tensor=x[0] - 1)
    popped, last = tf.raw_ops.TensorListPopBack(input_handle=twice, element_shape=SHAPE, element_dtype=F32)
    refilled = tf.raw_ops.TensorListPushBack(input_handle=popped, tensor=last * 0 + 7)
    n = x.shape[0]
    return (_stack(first, n), _stack(once, n), _stack(twice, n), _stack(left, n + 1), _stack(right, n + 1),
            _stack(refilled, n), _get(twice, n - 1), _get(first, 0), last)


def _reserved_forks(x):
    """A reserved list: unset elements read as zeros in every version, set ones only in the versions that set them."""
    reserved = tf.raw_ops.TensorListReserve(element_shape=SHAPE, num_elements=5, element_dtype=F32)
    one = tf.raw_ops.TensorListSetItem(input_handle=reserved, index=3, item=x[0])
    two = tf.raw_ops.TensorListSetItem(input_handle=one, index=1, item=x[1])
    other = tf.raw_ops.TensorListSetItem(input_handle=one, index=3, item=x[2])
    pushed = tf.raw_ops.TensorListPushBack(input_handle=reserved, tensor=x[1])
    popped, _ = tf.raw_ops.TensorListPopBack(input_handle=reserved, element_shape=SHAPE, element_dtype=F32)
    refilled = tf.raw_ops.TensorListPushBack(input_handle=popped, tensor=x[2])
    return (_stack(reserved, 5), _stack(one, 5), _stack(two, 5), _stack(other, 5), _stack(pushed, 6),
            _get(one, 1), _get(reserved, 3), _stack(refilled, 5), _get(reserved, 4), _get(one, 4))


@pytest.mark.parametrize("fn", [_forks, _reserved_forks])
def test_older_values_keep_their_elements(fn):
    x = _values((4, 2), np.float32, seed=31)
    _same(_runs_in_graph_ir(fn, [x]), fn(tf.constant(x)))


def _keeps_the_first(x):
    """A loop sets an element of its list every iteration and reads the list it started from each time: the first
    value falls up to 120 versions behind (past list_store.MAX_REROOT, where it gets a copy of its own)."""
    first = tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=SHAPE)
    n = x.shape[0]

    def body(i, handle, total):
        k = tf.math.floormod(i, n)
        total = total + _get(first, k)
        handle = tf.raw_ops.TensorListSetItem(input_handle=handle, index=k, item=_get(handle, k) * 0.5 + total)
        return i + 1, handle, total

    _, last, total = tf.while_loop(lambda i, h, t: i < 120, body, (0, first, tf.zeros([2])))
    return _stack(first, n), _stack(last, n), total


def test_a_value_far_behind_reads_as_tf_reads_it():
    assert list_store.MAX_REROOT < 120
    x = _values((5, 2), np.float32, seed=32)
    x[np.isinf(x)] = 2  # finite: the running total stays a number
    _same(_runs_in_graph_ir(_keeps_the_first, [x]), _keeps_the_first(tf.constant(x)))


def _shapes(x, w, y, build):
    """Elements of two shapes in one list (unknown element shape): the store changes form, older values keep theirs.
    `build` is tf.raw_ops or graph_ir.ops (TF's lowering refuses such a list; a GE file may hold one)."""
    tf_ops = build is tf.raw_ops
    typed = {} if tf_ops else {"element_dtype": "float32"}  # graph_ir's builders take every attribute
    const = tf.constant if tf_ops else (lambda v: Const(np.int32(v)))
    listed = build.EmptyTensorList(element_shape=const(-1), max_num_elements=const(-1), element_dtype=typed.get(
        "element_dtype", F32))
    one = build.TensorListPushBack(input_handle=listed, tensor=x, **typed)
    two = build.TensorListPushBack(input_handle=one, tensor=w, **typed)
    mixed = build.TensorListPushBack(input_handle=two, tensor=y, **typed)
    reset = build.TensorListSetItem(input_handle=mixed, index=const(0), item=y, **typed)

    def get(handle, k, shape):
        return build.TensorListGetItem(input_handle=handle, index=const(k), element_shape=const(shape),
                                       element_dtype=typed.get("element_dtype", F32))

    return [get(mixed, 2, [3]), get(reset, 0, [3]), get(mixed, 0, [2]), get(reset, 1, [2]), get(two, 1, [2])]


def test_elements_of_several_shapes():
    x, w, y = _values((2,), np.float32, seed=33), _values((2,), np.float32, seed=35), _values((3,), np.float32, seed=34)
    graph = graph_ir.Graph("shapes")
    with graph:
        graph.set_outputs(_shapes(*[graph_ir.Data(k, "float32", a.shape) for k, a in enumerate((x, w, y))],
                                  graph_ir.ops))
    session = graph_ir.Session()
    session.add_graph(0, graph)
    _same(session.run_graph(0, [x, w, y]), _shapes(tf.constant(x), tf.constant(w), tf.constant(y), tf.raw_ops))
