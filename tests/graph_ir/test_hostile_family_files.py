"""graph_ir.loads and the verifier against hostile files of the math, array, nn and norm families: a valid graph is
built with the builders, its ModelDef mutated, and the bytes loaded back. Every fault is a GraphError naming the node
and the field; nothing big is computed while a file loads; valid graphs that TF accepts load and run like TF."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir import ops, proto


def _model(build) -> proto.ModelDef:
    graph = graph_ir.Graph("family")
    with graph:
        out = build()
        graph.set_outputs(list(out) if isinstance(out, tuple) else [out])
    return graph.to_model_def()


def _op(model, name):
    return next(op for op in model.graph[0].op if op.name == name)


def _set_const(model, name: str, value: np.ndarray) -> None:
    """Replaces a Const's value (desc and data) and its output desc, as a file writer could."""
    op = _op(model, name)
    tensor = op.attr["value"].t
    del tensor.desc.shape.dim[:]
    tensor.desc.shape.dim.extend(value.shape)
    tensor.desc.dtype = graph_ir.ir.dtypes.as_dtype(value.dtype).proto
    tensor.data = value.astype(value.dtype.newbyteorder("<")).tobytes()
    del op.output_desc[0].shape.dim[:]
    op.output_desc[0].shape.dim.extend(value.shape)


def _loads_error(model, match: str) -> None:
    with pytest.raises(graph_ir.GraphError, match=match):
        graph_ir.loads(model.SerializeToString())


def _run(model) -> list[np.ndarray]:
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.loads(model.SerializeToString()))
    return session.run_graph(0, [])


_X = np.arange(6, dtype=np.float32).reshape(2, 3)


def _one_value_graphs():
    i32 = np.int32
    return {
        "ExpandDims": (lambda: ops.ExpandDims(graph_ir.Const(_X), graph_ir.Const(i32(1), name="k"), name="n"), "axis"),
        "GatherV2": (lambda: ops.GatherV2(graph_ir.Const(_X), graph_ir.Const(np.array([1, 0], i32)),
                                          graph_ir.Const(i32(1), name="k"), name="n"), "axis"),
        "ConcatV2": (lambda: ops.ConcatV2([graph_ir.Const(_X), graph_ir.Const(_X)], graph_ir.Const(i32(0), name="k"),
                                          N=2, name="n"), "concat_dim"),
        "UnsortedSegmentSum": (lambda: ops.UnsortedSegmentSum(graph_ir.Const(_X), graph_ir.Const(np.array([1, 0], i32)),
                                                              graph_ir.Const(i32(2), name="k"), name="n"),
                               "num_segments"),
    }


@pytest.mark.parametrize("op_type", list(_one_value_graphs()))
@pytest.mark.parametrize("value", [np.zeros(0, np.int32), np.array([0, 1], np.int32), np.zeros((1, 0), np.int32)],
                         ids=["empty", "two", "empty2d"])
def test_a_one_value_input_must_hold_one_value(op_type, value):
    build, field = _one_value_graphs()[op_type]
    _run(_model(build))  # the valid graph runs
    model = _model(build)
    _set_const(model, "k", value)
    _loads_error(model, re.escape(f"{op_type} 'n': input '{field}' must hold one value, got a Const of shape "
                                  f"{list(value.shape)}"))


def test_a_two_element_gather_axis_is_refused_by_the_builder_too():
    graph = graph_ir.Graph("g")
    with graph, pytest.raises(graph_ir.GraphError, match=r"GatherV2 'g': input 'axis' must hold one value"):
        ops.GatherV2(graph_ir.Const(_X), graph_ir.Const(np.array([0], np.int32)),
                     graph_ir.Const(np.array([0, 1], np.int32)), name="g")
    with pytest.raises(tf.errors.InvalidArgumentError, match="axis must be scalar"):
        tf.raw_ops.GatherV2(params=_X, indices=[0], axis=[0, 1])


def test_a_squeeze_axis_stored_as_floats_is_refused():
    build = lambda: ops.Squeeze(graph_ir.Const(np.zeros((1, 3, 1), np.float32)), axis=[0], name="sq")
    assert _run(_model(build))[0].shape == (3, 1)
    model = _model(build)
    axis = _op(model, "sq").attr["axis"].list
    del axis.i[:]
    axis.f.append(0.0)
    axis.val_type = proto.VT["VT_LIST_FLOAT"]
    _loads_error(model, r"node 'sq': attribute 'axis' must be a list of ints \(val_type VT_LIST_INT\), got val_type "
                        r"VT_LIST_FLOAT with fields \['f'\]")
    model = _model(build)
    _op(model, "sq").attr["axis"].list.f.append(1.0)  # ints and floats mixed
    _loads_error(model, r"node 'sq': attribute 'axis' must be a list of ints")


def _range_model(start, limit, delta):
    return _model(lambda: ops.Range(*[graph_ir.Const(np.asarray(v)) for v in (start, limit, delta)], name="r"))


def test_range_is_not_computed_while_the_file_loads():
    """Range(0, 1e12, 1): refused at once, naming the node, before anything is materialized."""
    model = _range_model(np.float32(0), np.float32(1), np.float32(1))
    _set_const(model, _op(model, "r").input[1].split(":")[0], np.array(1e12, np.float32))
    _op(model, "r").output_desc[0].shape.dim[0] = 999999995904
    begin = time.perf_counter()
    _loads_error(model, r"Range 'r': start 0.0, limit 999999995904.0, delta 1.0 give 999999995904 elements; graph_ir "
                        r"holds at most 2147483647")
    assert time.perf_counter() - begin < 1.0


def test_range_refusals_name_the_node():
    model = _range_model(np.float32(0), np.float32(1), np.float32(1))
    _set_const(model, _op(model, "r").input[2].split(":")[0], np.array(np.nan, np.float32))
    _loads_error(model, r"Range 'r': delta nan does not go from start 0.0 towards limit 1.0")
    model = _range_model(np.float32(1), np.float32(0), np.float32(-1))
    _set_const(model, _op(model, "r").input[2].split(":")[0], np.array(np.nan, np.float32))
    _loads_error(model, r"Range 'r': \(limit - start\) / delta is nan; TF requires a number <= 9223372036854775807")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"Requires \(\(limit - start\) / delta\) <="):
        tf.raw_ops.Range(start=np.float32(1), limit=np.float32(0), delta=np.float32(np.nan))
    graph = graph_ir.Graph("g")
    with graph, pytest.raises(graph_ir.GraphError, match=r"Range 'r': delta must not be 0"):
        ops.Range(*[graph_ir.Const(np.int64(v)) for v in (0, 5, 0)], name="r")


def test_range_with_a_huge_delta_loads_and_runs():
    """Range(0, 10, 2**62) in int64 is [0] (the direction check no longer overflows)."""
    model = _range_model(np.int64(0), np.int64(10), np.int64(2**62))
    np.testing.assert_array_equal(_run(model)[0], tf.raw_ops.Range(start=np.int64(0), limit=np.int64(10),
                                                                    delta=np.int64(2**62)).numpy())


@pytest.mark.parametrize("perm", [[-1, 0], [1, -2], [-2, -1], [2, 0], [-3, 0], [-1, 1]])
def test_transpose_takes_negative_perm_entries_as_tf(perm):
    def build():
        return ops.Transpose(graph_ir.Const(_X), graph_ir.Const(np.array(perm, np.int32)), name="t")

    try:
        want = tf.raw_ops.Transpose(x=_X, perm=perm).numpy()
    except tf.errors.InvalidArgumentError:
        graph = graph_ir.Graph("g")
        with graph, pytest.raises(graph_ir.GraphError, match=re.escape(f"Transpose 't': perm {perm} is not a "
                                                                        "permutation of rank 2")):
            build()
        return
    np.testing.assert_array_equal(_run(_model(build))[0], want)


def test_matmul_offset_w_without_bias_keeps_its_slot():
    """MatMulV2(x1, x2, offset_w=...) with no bias: bound by the input_desc names, offset_w stays offset_w."""
    x1, x2 = np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(12, dtype=np.float32).reshape(3, 4) - 5

    def build():
        return ops.MatMulV2(graph_ir.Const(x1), graph_ir.Const(x2), None, graph_ir.Const(np.zeros(4, np.int8)),
                            name="mm")

    model = _model(build)
    loaded = graph_ir.loads(model.SerializeToString())
    node = loaded.node("mm")
    assert node.inputs[2] is None and node.inputs[3].dtype.name == "int8"
    assert loaded.serialize() == model.SerializeToString()
    np.testing.assert_array_equal(_run(model)[0], tf.raw_ops.MatMul(a=x1, b=x2).numpy())
    _op(model, "mm").input_desc[2].name = "scale"
    _loads_error(model, r"node 'mm' \(MatMulV2\): input_desc\[2\] names input 'scale', which MatMulV2 does not have")
    model = _model(build)
    _op(model, "mm").input_desc[2].name = "x2"
    _loads_error(model, r"node 'mm' \(MatMulV2\): input_desc names input 'x2' twice")


def test_an_unknown_op_type_names_the_node():
    model = _model(lambda: ops.Relu(graph_ir.Const(_X), name="act"))
    _op(model, "act").type = "NoSuchOp"
    _loads_error(model, r"node 'act': no GE op 'NoSuchOp' in the registry \(unknown op type\)")


@pytest.mark.parametrize("op_type", ["Shape", "Size", "ShapeN"])
def test_an_int32_shape_beyond_int32_is_refused(op_type):
    def build(dims, dtype):
        x = graph_ir.Data(0, "int8", dims, name="x")
        out = getattr(ops, op_type)([x] if op_type == "ShapeN" else x, dtype=dtype, name="s")
        return out if isinstance(out, tuple) else (out,)

    model = _model(lambda: build((3, 5), 3))
    for dim in model.graph[0].op:
        if dim.name == "x":
            dim.output_desc[0].shape.dim[0] = 3 * 10**9
    what = {"Size": "x's element count [15000000000]", "ShapeN": "x0's shape [3000000000, 5]"}.get(
        op_type, "x's shape [3000000000, 5]")
    _loads_error(model, re.escape(f"{op_type} 's': {what} does not fit the int32 output"))
    graph = graph_ir.Graph("g")
    with graph:
        build((3 * 10**9, 5), 9)  # int64 holds it
    with graph_ir.Graph("g2"), pytest.raises(graph_ir.GraphError, match=rf"{op_type} 's': .*does not fit the int32 "
                                                                        r"output \(attribute 'dtype' DT_INT32\)"):
        build((3 * 10**9, 5), 3)


@pytest.mark.parametrize("shape", [[0, -1], [-1, 0], [2, -1, 0], [0, -1, 2], [-1], [-1, 3]])
def test_reshape_of_a_zero_size_tensor_follows_tf(shape):
    x = np.zeros((0, 3), np.float32)
    model = _model(lambda: ops.Reshape(graph_ir.Const(x), graph_ir.Const(np.array(shape, np.int32)), name="r"))
    got = _run(model)[0]
    assert got.shape == tf.raw_ops.Reshape(tensor=x, shape=shape).shape


def test_reshape_with_a_zero_dim_still_checks_the_count():
    graph = graph_ir.Graph("g")
    with graph, pytest.raises(graph_ir.GraphError, match=r"Reshape 'r': cannot reshape \[2, 3\] to \[0, 6\]"):
        ops.Reshape(graph_ir.Const(_X), graph_ir.Const(np.array([0, -1], np.int32)), name="r")
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.raw_ops.Reshape(tensor=_X, shape=[0, -1])


def test_softmax_axes_naming_one_axis_twice_are_refused():
    graph = graph_ir.Graph("g")
    with graph, pytest.raises(graph_ir.GraphError, match=r"SoftmaxV2 'sm': axes \[1, -1\] name one axis twice"):
        ops.SoftmaxV2(graph_ir.Const(_X), axes=[1, -1], name="sm")


def test_broadcast_gradient_args_of_scalar_consts_runs():
    """A 0-d Const shape reads as one dim at run time as when the graph was built."""
    model = _model(lambda: ops.BroadcastGradientArgs(graph_ir.Const(np.int32(3)), graph_ir.Const(np.int32(1))))
    r0, r1 = _run(model)
    assert r0.tolist() == [] and r1.tolist() == [0]
