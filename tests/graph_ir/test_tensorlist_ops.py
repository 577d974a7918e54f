"""The TensorList family (graph_ir/opset/tensorlist.py, executors/tensorlist.py, lowering/ops/tensorlist.py) against
TensorFlow's own list kernels (tf.raw_ops), bitwise: functions of TensorList ops lowered, saved as .air, loaded back
and run in graph_ir.Session beside TF on fresh values (zeros, negatives, NaN and +-inf, odd sizes; float32, float16,
int32 and uint8 elements). The errors of TF's kernels (an index out of range, popping an empty list, pushing into a
full one, an element of the wrong shape) are GraphErrors naming the node; what cannot have a static shape is a
LoweringError naming the TF node."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir.executors import list_store, tensorlist
from graph_ir.ir.dtypes import as_dtype

F32 = tf.float32
# The TF list ops _sequence_ops runs, each once (tests/graph_ir/test_family_ops.py reads it).
TESTED = ("TensorListFromTensor", "TensorListGetItem", "TensorListReserve", "TensorListSetItem", "TensorListStack",
          "EmptyTensorList", "TensorListPushBack", "TensorListPopBack", "TensorListLength", "TensorListElementShape")


def _values(shape, dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-50, 50, shape).astype(dtype)
    x = rng.standard_normal(shape).astype(dtype).reshape(-1)
    x[::5] = 0
    if x.size > 3:
        x[1], x[2], x[3] = np.nan, np.inf, -np.inf
    return x.reshape(shape)


def _run(fn, arrays, tmp_path) -> list[np.ndarray]:
    graph = graph_ir.from_tensorflow(tf.function(fn), *[tf.TensorSpec(a.shape, a.dtype) for a in arrays])
    path = os.path.join(tmp_path, "lists.air")
    graph.save(path)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.load(path))
    return session.run_graph(0, list(arrays))


def _same(got: list[np.ndarray], want) -> None:
    want = want if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        assert g.tobytes() == w.tobytes()  # bitwise, NaNs included


def _sequence_ops(x):
    """Every op once: FromTensor, GetItem, Reserve, SetItem (unset elements read as zeros), Stack, EmptyTensorList,
    PushBack, PopBack, Length and ElementShape."""
    dtype = x.dtype
    shape = x.shape[1:]
    listed = tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=tf.constant(shape.as_list(), tf.int32))
    second = tf.raw_ops.TensorListGetItem(input_handle=listed, index=1, element_shape=tf.constant(-1),
                                          element_dtype=dtype)
    reserved = tf.raw_ops.TensorListReserve(element_shape=tf.constant([-1] * len(shape), tf.int32),
                                            num_elements=x.shape[0] + 2, element_dtype=dtype)
    reserved = tf.raw_ops.TensorListSetItem(input_handle=reserved, index=2, item=second)
    reserved = tf.raw_ops.TensorListSetItem(input_handle=reserved, index=0, item=x[-1])
    stacked = tf.raw_ops.TensorListStack(input_handle=reserved, element_shape=tf.constant(shape.as_list(), tf.int32),
                                         element_dtype=dtype, num_elements=x.shape[0] + 2)
    pushed = tf.raw_ops.EmptyTensorList(element_shape=tf.constant(-1), max_num_elements=-1, element_dtype=dtype)
    for k in (2, 0, 1):
        pushed = tf.raw_ops.TensorListPushBack(input_handle=pushed, tensor=x[k])
    pushed, last = tf.raw_ops.TensorListPopBack(input_handle=pushed, element_shape=tf.constant(-1),
                                                element_dtype=dtype)
    length = tf.raw_ops.TensorListLength(input_handle=pushed)
    declared = tf.raw_ops.TensorListElementShape(input_handle=reserved, shape_type=tf.int32)
    unknown_rank = tf.raw_ops.TensorListElementShape(input_handle=pushed, shape_type=tf.int64)
    whole = tf.raw_ops.TensorListStack(input_handle=listed, element_shape=tf.constant(shape.as_list(), tf.int32),
                                       element_dtype=dtype, num_elements=-1)
    return stacked, second, last, length, declared, unknown_rank, whole


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8])
@pytest.mark.parametrize("shape", [(3, 4), (5, 2, 3), (3,)])
def test_list_ops_are_tensorflows(dtype, shape, tmp_path):
    x = _values(shape, dtype, seed=len(shape) * 7 + np.dtype(dtype).itemsize)
    _same(_run(_sequence_ops, [x], tmp_path), _sequence_ops(tf.constant(x)))


def _runs_in_graph_ir(fn, arrays):
    graph = graph_ir.from_tensorflow(tf.function(fn), *[tf.TensorSpec(a.shape, a.dtype) for a in arrays])
    session = graph_ir.Session()
    session.add_graph(0, graph)
    return session.run_graph(0, list(arrays))


def _get(x, index):
    listed = tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=tf.constant([2], tf.int32))
    return tf.raw_ops.TensorListGetItem(input_handle=listed, index=index, element_shape=tf.constant([2], tf.int32),
                                        element_dtype=F32)


def _set(x, index):
    listed = tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=tf.constant([2], tf.int32))
    listed = tf.raw_ops.TensorListSetItem(input_handle=listed, index=index, item=x[0] * 2, name="set")
    return tf.raw_ops.TensorListStack(input_handle=listed, element_shape=tf.constant([2], tf.int32),
                                      element_dtype=F32, num_elements=3)


def _pop_too_many(x, count):
    listed = tf.raw_ops.EmptyTensorList(element_shape=tf.constant([2], tf.int32), max_num_elements=-1,
                                        element_dtype=F32)
    listed = tf.raw_ops.TensorListPushBack(input_handle=listed, tensor=x[0])
    for k in range(2):
        listed, item = tf.raw_ops.TensorListPopBack(input_handle=listed, element_shape=tf.constant([2], tf.int32),
                                                    element_dtype=F32, name=f"pop{k}")
    return item + tf.cast(count, F32)


def _push_into_full(x, count):
    listed = tf.raw_ops.EmptyTensorList(element_shape=tf.constant([2], tf.int32), max_num_elements=1,
                                        element_dtype=F32)
    listed = tf.raw_ops.TensorListPushBack(input_handle=listed, tensor=x[0])
    listed = tf.raw_ops.TensorListPushBack(input_handle=listed, tensor=x[1], name="push")
    return tf.raw_ops.TensorListLength(input_handle=listed) + count


@pytest.mark.parametrize("fn, second, message", [
    (_get, np.int32(3), r"TensorListGetItem '.*': trying to access element 3 in a list with 3 elements"),
    (_get, np.int32(-1), r"trying to access element -1 in a list with 3 elements"),
    (_set, np.int32(5), r"TensorListSetItem 'set': trying to modify element 5 in a list with 3 elements"),
    (_pop_too_many, np.int32(0), r"TensorListPopBack 'pop1': trying to pop from an empty list"),
    (_push_into_full, np.int32(0), r"TensorListPushBack 'push': tried to push item into a full list"),
])
def test_what_tf_refuses_at_run_time_is_a_graph_error_naming_the_node(fn, second, message):
    x = _values((3, 2), np.float32, seed=9)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.function(fn)(x, second)
    with pytest.raises(graph_ir.GraphError, match=message):
        _runs_in_graph_ir(fn, [x, second])


def test_a_read_without_a_static_shape_is_a_lowering_error():
    def unknown(x):
        listed = tf.raw_ops.EmptyTensorList(element_shape=tf.constant(-1), max_num_elements=-1, element_dtype=F32)
        listed = tf.raw_ops.TensorListPushBack(input_handle=listed, tensor=x)
        return tf.raw_ops.TensorListStack(input_handle=listed, element_shape=tf.constant(-1), element_dtype=F32,
                                          name="stack_all")

    graph_ir.from_tensorflow(tf.function(unknown), tf.TensorSpec((2,), F32))  # the length is known: one push

    def loop(x):
        listed = tf.raw_ops.EmptyTensorList(element_shape=tf.constant(-1), max_num_elements=-1, element_dtype=F32)
        _, listed = tf.while_loop(lambda i, h: i < tf.cast(x[0], tf.int32), lambda i, h: (
            i + 1, tf.raw_ops.TensorListPushBack(input_handle=h, tensor=x)), (0, listed))
        return tf.raw_ops.TensorListStack(input_handle=listed, element_shape=tf.constant([2], tf.int32),
                                          element_dtype=F32, name="stack_all")

    with pytest.raises(graph_ir.LoweringError, match=r"TF TensorListStack 'stack_all'.*length is not known"):
        graph_ir.from_tensorflow(tf.function(loop), tf.TensorSpec((2,), F32))


def test_lists_are_immutable_values_and_bounded(monkeypatch):
    x = _values((3, 2), np.float32, seed=11)

    def both(t):
        listed = tf.raw_ops.TensorListFromTensor(tensor=t, element_shape=tf.constant([2], tf.int32))
        changed = tf.raw_ops.TensorListSetItem(input_handle=listed, index=0, item=t[2])
        stack = [tf.raw_ops.TensorListStack(input_handle=h, element_shape=tf.constant([2], tf.int32),
                                            element_dtype=F32, num_elements=3) for h in (listed, changed)]
        return stack[0], stack[1]

    _same(_runs_in_graph_ir(both, [x]), both(tf.constant(x)))  # the SetItem left its input list as it was
    monkeypatch.setattr(list_store, "MAX_LIST_BYTES", 16)
    with pytest.raises(graph_ir.GraphError, match=r"TensorListFromTensor '.*': the list would hold 27 bytes"):
        _runs_in_graph_ir(both, [x])
    value = tensorlist.TensorList(np.dtype(np.float32), (2,), 0)
    assert tensorlist.unwrap(None, tensorlist.wrap(value)) is value
    assert as_dtype("variant").itemsize == 0  # the planner counts no bytes for a list handle


def test_a_file_with_a_variant_constant_is_refused():
    with graph_ir.Graph("g") as graph:
        const = graph.add_node("Const", (), {"value": np.zeros(2, np.float32)})
        graph.set_outputs([const.output(0)])
    model = graph.to_model_def()
    (node,) = [n for n in model.graph[0].op if n.type == "Const"]
    node.attr["value"].t.desc.dtype = 26  # ge.proto DT_VARIANT
    node.attr["value"].t.data = b""
    with pytest.raises(graph_ir.GraphError, match=r"node 'Const': attribute 'value' is a variant tensor"):
        graph_ir.loads(model.SerializeToString())
