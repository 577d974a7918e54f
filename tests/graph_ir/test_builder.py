"""graph_ir's registry, builders and verifier: every bad case gets a clear GraphError and adds nothing."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import graph_ir
from graph_ir import ops
from graph_ir.ir import registry
from graph_ir.ir.errors import GraphError

PS_INPUTS = ("var", "m", "lr", "logbase", "sign_decay", "beta", "grad")


def test_registry_matches_cann_prototypes():
    ps = registry.get("InplaceApplyPowerSign")
    assert [i.name for i in ps.inputs] == list(PS_INPUTS)
    assert [o.name for o in ps.outputs] == ["var", "m"]
    assert ps.refs == {0: 0, 1: 1}  # derived from equal names
    assert [(a.name, a.default) for a in ps.attrs] == [("use_locking", False)]
    fea = registry.get("ApplyFusedEmaAdam")
    assert [i.name for i in fea.inputs] == ["grad", "var", "m", "v", "s", "step"]
    assert [o.name for o in fea.outputs] == ["var", "m", "v", "s"]
    assert fea.refs == {0: 1, 1: 2, 2: 3, 3: 4}
    assert [(a.name, a.type, a.default) for a in fea.attrs] == [
        ("lr", "float", 1e-3), ("ema_decay", "float", 0.9999), ("beta1", "float", 0.9), ("beta2", "float", 0.999),
        ("eps", "float", 1e-8), ("mode", "int", 1), ("bias_correction", "bool", True), ("weight_decay", "float", 0.0)]
    assert fea.input("step").dtypes == ("int64",)
    for name in ("Data", "RefData", "Variable", "Const", "NetOutput", "Cast", "Identity", "Reshape"):
        assert registry.get(name).refs == {}


def test_generated_builders_have_the_ir_signature():
    sig = inspect.signature(ops.InplaceApplyPowerSign)
    assert list(sig.parameters)[:7] == list(PS_INPUTS)
    assert sig.parameters["use_locking"].kind is inspect.Parameter.KEYWORD_ONLY
    sig = inspect.signature(ops.ApplyFusedEmaAdam)
    assert list(sig.parameters)[:6] == ["grad", "var", "m", "v", "s", "step"]
    assert sig.parameters["lr"].default == 1e-3 and sig.parameters["mode"].default == 1
    assert "InplaceApplyPowerSign" in ops.InplaceApplyPowerSign.__doc__


def _power_sign_graph(dtype="float32", shape=(8,), scalar_shape=(1,)):
    graph = graph_ir.Graph("g")
    with graph:
        handles = [graph_ir.Data(i, dtype, scalar_shape if n in ("lr", "logbase", "sign_decay", "beta") else shape,
                                 name=n) for i, n in enumerate(PS_INPUTS)]
    return graph, handles


def test_build_power_sign_unique_names_and_handles():
    graph, h = _power_sign_graph()
    with graph:
        var, m = ops.InplaceApplyPowerSign(*h)
        var2, m2 = ops.InplaceApplyPowerSign(var, m, *h[2:])
        graph.set_outputs([var2, m2])
    names = [n.name for n in graph.nodes.values()]
    assert "InplaceApplyPowerSign" in names and "InplaceApplyPowerSign_1" in names
    assert var.edge == "InplaceApplyPowerSign:0" and m.edge == "InplaceApplyPowerSign:1"
    assert var.dtype.name == "float32" and var.shape == (8,)
    assert [n.name for n in graph.topological_order()][-1] == "NetOutput"


def test_numbers_become_consts_of_the_op_dtype_with_scalar_shape_one():
    graph = graph_ir.Graph("g")
    with graph:
        var = graph_ir.Variable("w", np.zeros(4, np.float16))
        m = graph_ir.Variable("w_m", np.zeros(4, np.float16))
        grad = graph_ir.Data(0, "float16", (4,))
        ops.InplaceApplyPowerSign(var, m, 0.1, 1.0, 1.0, 0.9, grad)
    consts = graph.nodes_of_type("Const")
    assert len(consts) == 4
    assert all(c.output_descs[0].dtype.name == "float16" and c.output_descs[0].shape == (1,) for c in consts)


BAD = {
    "missing input": (lambda h: ops.InplaceApplyPowerSign(*h[:6]), "missing a required argument: 'grad'"),
    "too many inputs": (lambda h: ops.InplaceApplyPowerSign(*h, h[0]), "too many positional arguments"),
    "verifier: missing input": (lambda h: graph_ir.ir.graph.default_graph().add_node("InplaceApplyPowerSign", h[:6]),
                                "required input 'grad' is missing"),
    "verifier: too many inputs": (lambda h: graph_ir.ir.graph.default_graph().add_node("InplaceApplyPowerSign", h + h[:1]),
                                  "takes 7 inputs"),
    "verifier: unknown op": (lambda h: graph_ir.ir.graph.default_graph().add_node("ApplyAdam", h), "no GE op 'ApplyAdam'"),
    "unknown attr": (lambda h: ops.InplaceApplyPowerSign(*h, beta1=0.9), "unexpected keyword|unknown attribute"),
    "attr type": (lambda h: ops.InplaceApplyPowerSign(*h, use_locking=1), "'use_locking' must be a bool"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_builder_calls(case):
    graph, h = _power_sign_graph()
    before = set(graph.nodes)
    with graph, pytest.raises((GraphError, TypeError), match=BAD[case][1]):
        BAD[case][0](h)
    assert set(graph.nodes) == before  # nothing half-added


def test_dtype_constraints():
    graph, h = _power_sign_graph("float64")
    with graph, pytest.raises(GraphError, match="input 'var' has dtype float64, expected one of float16, bfloat16"):
        ops.InplaceApplyPowerSign(*h)
    graph, h = _power_sign_graph()
    with graph:
        grad16 = graph_ir.Data(7, "float16", (8,))
        with pytest.raises(GraphError, match="'grad' has dtype float16 but 'var' has float32; .* share one dtype"):
            ops.InplaceApplyPowerSign(*h[:6], grad16)
        int_var = graph_ir.Data(8, "int32", (8,))
        with pytest.raises(GraphError, match="input 'var' has dtype int32"):
            ops.InplaceApplyPowerSign(int_var, *h[1:])


def test_shape_constraints():
    graph, h = _power_sign_graph()
    with graph:
        grad = graph_ir.Data(7, "float32", (9,))
        with pytest.raises(GraphError, match=r"'grad' has shape \[9\] but 'var' has \[8\]"):
            ops.InplaceApplyPowerSign(*h[:6], grad)
        for bad_shape in ((2,), (1, 1)):
            lr = graph_ir.Data(graph_ir.ir.graph.default_graph().nodes.__len__() + 10, "float32", bad_shape)
            with pytest.raises(GraphError, match=r"'lr' must be a scalar of shape \[\] or \[1\]"):
                ops.InplaceApplyPowerSign(h[0], h[1], lr, *h[3:])


def _fea_inputs(dtype="float32", step_dtype="int64", step_shape=(1,)):
    graph = graph_ir.Graph("fea")
    with graph:
        grad = graph_ir.Data(0, dtype, (3, 2))
        state = [graph_ir.Variable(n, np.zeros((3, 2), np.float32)) for n in ("var", "m", "v", "s")]
        step = graph_ir.Data(1, step_dtype, step_shape, name="step")
    return graph, [grad, *state, step]


def test_fused_ema_adam_constraints():
    graph, h = _fea_inputs()
    with graph:
        var, _m, _v, _s = ops.ApplyFusedEmaAdam(*h, lr=0.01, weight_decay=0.1)
        assert var.node.attrs["lr"] == 0.01 and var.node.attrs["ema_decay"] == 0.9999  # defaults filled in
    graph, h = _fea_inputs(step_dtype="int32")
    with graph, pytest.raises(GraphError, match="input 'step' has dtype int32, expected one of int64"):
        ops.ApplyFusedEmaAdam(*h)
    graph, h = _fea_inputs(step_shape=(2,))
    with graph, pytest.raises(GraphError, match="'step' must be a scalar"):
        ops.ApplyFusedEmaAdam(*h)
    graph, h = _fea_inputs()
    with graph:
        with pytest.raises(GraphError, match="'mode' must be an int"):
            ops.ApplyFusedEmaAdam(*h, mode=1.0)
        with pytest.raises(GraphError, match="'lr' must be a float"):
            ops.ApplyFusedEmaAdam(*h, lr="0.1")
        with pytest.raises(GraphError, match="'bias_correction' must be a bool"):
            ops.ApplyFusedEmaAdam(*h, bias_correction=None)


def test_graph_input_and_variable_rules():
    graph = graph_ir.Graph("g")
    with graph:
        graph_ir.Data(0, "float32", (2,))
        with pytest.raises(GraphError, match="index 0 is already fed"):
            graph_ir.Data(0, "float32", (2,))
        with pytest.raises(GraphError, match="index must be an int >= 0"):
            graph_ir.Data(-1)
        with pytest.raises(TypeError, match="unsupported dtype"):
            graph_ir.Data(3, "complex128")
        graph_ir.Variable("w", np.ones(3, np.float32))
        with pytest.raises(GraphError, match="a node named 'w' already exists"):
            graph_ir.Variable("w", np.ones(3, np.float32))
        with pytest.raises(GraphError, match="without ':'"):
            graph_ir.Variable("w:0", np.ones(3, np.float32))
    with pytest.raises(GraphError, match="no graph"):
        graph_ir.Data(0)


def test_handles_of_another_graph_and_cycles():
    _g1, h1 = _power_sign_graph()
    g2 = graph_ir.Graph("other")
    with g2, pytest.raises(GraphError, match="is not an output of a node of graph 'other'"):
        ops.InplaceApplyPowerSign(*h1)
    g, h = _power_sign_graph()
    with g:
        ident = ops.Identity(h[0])
    ident.node.control_inputs.append(ident.node)  # force a cycle, as a corrupted file could
    with pytest.raises(GraphError, match="cycle"):
        g.verify()


def test_dtype_names_and_objects():
    import tensorflow as tf

    graph = graph_ir.Graph("g")
    with graph:
        for i, dt in enumerate(["bfloat16", np.float16, np.dtype("float32"), tf.int64, "float"]):
            graph_ir.Data(i, dt, ())
    assert [n.output_descs[0].dtype.name for n in graph.nodes.values()] == [
        "bfloat16", "float16", "float32", "int64", "float32"]


def test_cast_and_reshape_infer_outputs():
    graph = graph_ir.Graph("g")
    with graph:
        x = graph_ir.Data(0, "float32", (2, 3))
        y = ops.Cast(x, dst_type="bfloat16")
        z = ops.Reshape(y, graph_ir.Const(np.array([3, -1], np.int64)))
    assert y.dtype.name == "bfloat16" and z.shape == (3, 2)
    with graph, pytest.raises(GraphError, match="cannot reshape"):
        ops.Reshape(y, graph_ir.Const(np.array([4], np.int64)))
