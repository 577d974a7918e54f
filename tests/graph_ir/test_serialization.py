"""ModelDef serialization: the fields CANN's GE reads, and .air / .pbtxt / bytes round trips."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from google.protobuf import text_format

import graph_ir
from graph_ir import ops, proto


def _graph(dtype="float32"):
    rng = np.random.default_rng(3)
    np_dtype = graph_ir.ir.dtypes.as_dtype(dtype).numpy
    graph = graph_ir.Graph("ser")
    with graph:
        var = graph_ir.Variable("layer/w", rng.standard_normal((2, 3)).astype(np_dtype))
        m = graph_ir.Variable("layer/w_m", np.zeros((2, 3), np_dtype))
        grad = graph_ir.Data(0, dtype, (2, 3), name="grad")
        lr = graph_ir.Const(np.array([0.1], np_dtype), name="lr")
        var_out, m_out = ops.InplaceApplyPowerSign(var, m, lr, 1.0, 0.5, 0.9, grad, name="update")
        cast = ops.Cast(var_out, dst_type="float32", name="cast", control_inputs=[m_out])
        grad2 = graph_ir.Data(1, dtype, (2, 3), name="grad2")
        v = graph_ir.Variable("layer/w_v", np.zeros((2, 3), np_dtype))
        s = graph_ir.Variable("layer/w_s", np.zeros((2, 3), np_dtype))
        step = graph_ir.Const(np.array([3], np.int64), name="step")
        fea = ops.ApplyFusedEmaAdam(grad2, var_out, m_out, v, s, step, lr=0.01, mode=0, name="fea")
        graph.set_outputs([cast, fea[3]])
    return graph


def test_model_def_fields():
    model = _graph("bfloat16").to_model_def()
    assert model.name == "ser" and len(model.graph) == 1
    ops_by_name = {op.name: op for op in model.graph[0].op}
    update = ops_by_name["update"]
    assert update.type == "InplaceApplyPowerSign"
    assert list(update.input) == ["layer/w:0", "layer/w_m:0", "lr:0", "Const:0", "Const_1:0", "Const_2:0", "grad:0"]
    assert [d.name for d in update.input_desc] == ["var", "m", "lr", "logbase", "sign_decay", "beta", "grad"]
    assert [d.name for d in update.output_desc] == ["var", "m"]  # ref outputs: named like their inputs
    assert all(d.dtype == proto.TensorDescriptor().DESCRIPTOR.fields_by_name["dtype"].enum_type
               .values_by_name["DT_BF16"].number for d in update.output_desc)
    assert update.output_desc[0].layout == "ND" and list(update.output_desc[0].shape.dim) == [2, 3]
    assert list(update.input_desc[2].shape.dim) == [1]
    assert [s.decode() for s in update.attr["_input_name_key"].list.s] == [d.name for d in update.input_desc]
    assert list(update.attr["_input_name_value"].list.i) == list(range(7))
    assert [s.decode() for s in update.attr["_output_name_key"].list.s] == ["var", "m"]
    for key in ("_input_name_key", "_output_name_key"):
        assert update.attr[key].list.val_type == proto.VT["VT_LIST_STRING"]
    for key in ("_input_name_value", "_output_name_value"):
        assert update.attr[key].list.val_type == proto.VT["VT_LIST_INT"]
    assert update.attr["use_locking"].WhichOneof("value") == "b"
    cast = ops_by_name["cast"]
    assert list(cast.input) == ["update:0", "update:-1"]  # data edges, then the control edge as name:-1
    # REQUIRED_ATTR(dst_type, Int): an Int holding ge::DataType DT_FLOAT = 0 (the C++ numbering; proto DT_FLOAT = 1)
    assert cast.attr["dst_type"].WhichOneof("value") == "i" and cast.attr["dst_type"].i == 0
    assert cast.output_desc[0].dtype == 1
    fea = ops_by_name["fea"]
    assert list(fea.input)[:2] == ["grad2:0", "update:0"]
    assert fea.attr["lr"].f == pytest.approx(0.01) and fea.attr["mode"].i == 0
    assert fea.attr["bias_correction"].b is True
    assert list(ops_by_name["step"].attr["value"].t.desc.shape.dim) == [1]
    assert ops_by_name["step"].attr["value"].t.desc.dtype == 8  # proto DT_INT64
    w = ops_by_name["layer/w"]
    assert w.type == "Variable" and w.attr["shared_name"].s == b"layer/w"
    t = w.attr["value"].t
    value = np.frombuffer(t.data, dtype=ml_dtypes.bfloat16).reshape(list(t.desc.shape.dim))
    np.testing.assert_array_equal(value, _graph("bfloat16").node("layer/w").attrs["value"])
    net = ops_by_name["NetOutput"]
    assert [d.name for d in net.input_desc] == ["input0", "input1"] and list(net.input) == ["cast:0", "fea:3"]
    data = ops_by_name["grad"]
    assert data.attr["index"].i == 0 and data.input_desc[0].name == "x" and data.output_desc[0].name == "y"
    # Every node comes after its inputs (GE accepts any order; this keeps files readable).
    seen = set()
    for op in model.graph[0].op:
        assert all(e.rpartition(":")[0] in seen for e in op.input), op.name
        seen.add(op.name)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("ext", ["air", "pbtxt"])
def test_file_round_trip(tmp_path, dtype, ext):
    graph = _graph(dtype)
    path = str(tmp_path / f"g.{ext}")
    graph.save(path)
    again = graph_ir.load(path)
    assert again.serialize() == graph.serialize()
    assert [n.type for n in again.topological_order()] == [n.type for n in graph.topological_order()]
    np.testing.assert_array_equal(again.node("layer/w").attrs["value"], graph.node("layer/w").attrs["value"])
    if ext == "pbtxt":
        with open(path) as f:
            text = f.read()
        assert 'type: "InplaceApplyPowerSign"' in text and "VT_LIST_STRING" in text
        text_format.Parse(text, proto.ModelDef())


def test_bytes_round_trip_and_runs_the_same():
    graph = _graph()
    again = graph_ir.loads(graph.serialize())
    rng = np.random.default_rng(4)
    feeds = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2)]
    results = []
    for g in (graph, again):
        session = graph_ir.Session()
        session.add_graph(0, g)
        results.append(session.run_graph(0, feeds))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_bad_files(tmp_path):
    with pytest.raises(ValueError, match=".air .*or .pbtxt"):
        _graph().save(str(tmp_path / "g.bin"))
    model = _graph().to_model_def()
    model.graph[0].op[-1].input.append("nowhere:0")
    with pytest.raises(graph_ir.GraphError, match="'nowhere'"):
        graph_ir.loads(model.SerializeToString())
    model = _graph().to_model_def()
    model.graph[0].op.add(name="x", type="ApplyAdam")
    with pytest.raises(graph_ir.GraphError, match="no GE op 'ApplyAdam'"):
        graph_ir.loads(model.SerializeToString())
    model = _graph().to_model_def()
    update = next(op for op in model.graph[0].op if op.name == "update")
    del update.input[-1]  # drop grad
    with pytest.raises(graph_ir.GraphError, match="required input 'grad' is missing"):
        graph_ir.loads(model.SerializeToString())
