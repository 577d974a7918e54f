"""graph_ir.load / loads against hostile files: every fault is a GraphError naming the node and the field."""

from __future__ import annotations

import numpy as np
import pytest

import graph_ir
from graph_ir import proto
from tests.helpers.graphs import fused_ema_adam_graph, power_sign_graph


def _model():
    return power_sign_graph().to_model_def()


def _op(model, name):
    return next(op for op in model.graph[0].op if op.name == name)


def _loads_error(model, match: str) -> None:
    with pytest.raises(graph_ir.GraphError, match=match):
        graph_ir.loads(model.SerializeToString())


@pytest.mark.parametrize(("edge", "match"), [
    ("grad:x", r"node 'update': malformed input edge 'grad:x'"),
    ("grad", r"malformed input edge 'grad'"),
    ("grad:5", r"input grad:5 does not exist; Data 'grad' has 1 outputs"),
    ("grad:" + "9" * 40, "malformed input edge"),
    ("grad:\u0661", "malformed input edge"),  # an Arabic-Indic digit one
    ("grad:-2", "malformed input edge"),
    ("grad:01", "malformed input edge"),
    (":0", "malformed input edge"),
])
def test_malformed_edges(edge, match):
    model = _model()
    update = _op(model, "update")
    update.input[-1] = edge
    _loads_error(model, match)


def test_output_desc_faults():
    model = _model()
    _op(model, "cast").output_desc.add().CopyFrom(_op(model, "cast").output_desc[0])
    _loads_error(model, r"Cast 'cast': has 2 output descs, expected 1")
    model = _model()
    del _op(model, "grad").output_desc[:]
    _loads_error(model, r"Data 'grad': needs exactly 1 output desc")
    model = _model()
    _op(model, "cast").output_desc[0].shape.dim[0] = 9
    _loads_error(model, r"Cast 'cast': output_desc 0 says float32\[9\], but the node produces float32\[8\]")
    model = _model()
    _op(model, "grad").output_desc[0].shape.dim[0] = -1
    _loads_error(model, r"InplaceApplyPowerSign 'update': input 'grad' has shape \[-1\] but 'var' has \[8\]")
    model = _model()
    _op(model, "grad").output_desc[0].dtype = 999
    _loads_error(model, r"node 'grad': output_desc\[0\] has unsupported ge.proto.DataType 999")


def test_values_are_checked_against_their_descs():
    model = _model()
    value = _op(model, "w").attr["value"].t
    value.data = value.data[:-4]
    _loads_error(model, r"node 'w': attribute 'value' holds 28 bytes of data, but its desc float32\[8\] needs 32")
    model = _model()
    del _op(model, "w").attr["value"]
    _loads_error(model, r"Variable 'w': required attribute 'value' \(tensor\) is missing")
    model = _model()
    _op(model, "cast").attr["dst_type"].i = 12345
    _loads_error(model, r"node 'cast': attribute 'dst_type' has unsupported ge::DataType 12345")
    model = _model()
    _op(model, "cast").attr["dst_type"].dt = 0  # CANN's dst_type is an Int attr, not a Type one
    _loads_error(model, r"node 'cast': attribute 'dst_type' is stored as 'dt', expected 'i'")
    model = _model()
    _op(model, "update").attr["use_locking"].i = 1
    _loads_error(model, r"node 'update': attribute 'use_locking' is stored as 'i', expected 'b'")


def test_invalid_utf8_in_a_string_attr():
    model = _model()
    _op(model, "w").attr["container"].s = b"\xff\xfe"
    _loads_error(model, r"node 'w': attribute 'container' is not valid UTF-8")


def test_reserved_net_output_name_and_one_output_node():
    model = _model()
    _op(model, "cast").name = "NetOutput"
    _loads_error(model, r"node 'NetOutput' \(Cast\): the name 'NetOutput' belongs to the one node of type NetOutput")
    model = _model()
    extra = model.graph[0].op.add()
    extra.CopyFrom(_op(model, "NetOutput"))
    _loads_error(model, r"two nodes named 'NetOutput'")
    model = _model()
    extra = model.graph[0].op.add()
    extra.CopyFrom(_op(model, "NetOutput"))
    extra.name = "Out2"
    _loads_error(model, r"node 'Out2' \(NetOutput\): the name 'NetOutput' belongs")


def test_a_const_in_an_in_place_slot_is_refused():
    model = _model()
    w = _op(model, "w")
    w.type = "Const"
    for key in ("index", "container", "shared_name"):
        del w.attr[key]
    _loads_error(model, r"InplaceApplyPowerSign 'update': input 'var' is written in place, so it must come from a "
                        r"Variable, RefData, Data node, got Const 'w'")
    graph = graph_ir.Graph("g")
    with graph, pytest.raises(graph_ir.GraphError, match="written in place"):
        graph_ir.ops.InplaceApplyPowerSign(np.zeros(3, np.float32), np.zeros(3, np.float32), 0.1, 1.0, 1.0, 0.9,
                                           graph_ir.Data(0, "float32", (3,)))


def test_deep_chain_out_of_order_loads_without_recursion():
    """3,000 Identities written in reverse order: the loader's walk is iterative, and the graph runs."""
    graph = graph_ir.Graph("chain")
    with graph:
        h = graph_ir.Const(np.arange(4, dtype=np.float32), name="c")
        for k in range(3000):
            h = graph_ir.ops.Identity(h, name=f"i{k}")
        graph.set_outputs([h])
    model = graph.to_model_def()
    ops = list(model.graph[0].op)
    del model.graph[0].op[:]
    model.graph[0].op.extend(reversed(ops))
    again = graph_ir.loads(model.SerializeToString())
    session = graph_ir.Session()
    session.add_graph(0, again)
    np.testing.assert_array_equal(session.run_graph(0, [])[0], np.arange(4, dtype=np.float32))


def test_cycles_and_duplicate_names():
    model = _model()
    _op(model, "grad").input.append("cast:0")
    _loads_error(model, r"has a cycle through node")
    model = _model()
    _op(model, "cast").name = "update"
    _loads_error(model, r"two nodes named 'update'")


def test_deep_text_nesting_and_garbage(tmp_path):
    path = tmp_path / "deep.pbtxt"
    path.write_text("graph { " * 300 + "}" * 300)
    with pytest.raises(graph_ir.GraphError, match="nests deeper than 64 levels"):
        graph_ir.load(str(path))
    path.write_bytes(b"\xff\xfe not text")
    with pytest.raises(graph_ir.GraphError, match="is not UTF-8 text"):
        graph_ir.load(str(path))
    path.write_text("graph { op { name: ")
    with pytest.raises(graph_ir.GraphError, match="not a valid text ge.proto.ModelDef"):
        graph_ir.load(str(path))
    with pytest.raises(graph_ir.GraphError, match="not a valid binary ge.proto.ModelDef"):
        graph_ir.loads(b"\x0a\xff\xff\xff\xff\x0f")
    with pytest.raises(graph_ir.GraphError, match="holds 0 graphs"):
        graph_ir.loads(b"")
    with pytest.raises(TypeError, match="takes bytes"):
        graph_ir.loads("text")


def test_round_trips_stay_exact_for_real_graphs():
    for graph in (power_sign_graph("bfloat16"), fused_ema_adam_graph("float16")):
        data = graph.serialize()
        assert graph_ir.loads(data).serialize() == data
        assert isinstance(proto.ModelDef.FromString(data), proto.ModelDef)
