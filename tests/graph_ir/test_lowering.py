"""graph_ir.from_tensorflow: the lowered graph's structure for every TF op the table covers, the errors, and the
session running a lowered training step K times giving TensorFlow's variables (bitwise for float32)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
import tf_plugin
from graph_ir.lowering.table import LOWERINGS, MULTI_LOWERINGS
from op_spec.reference import random_tensor

K = 5


def _vars(rng, shape, dtype, names):
    return [tf.Variable(random_tensor(rng, shape, dtype), name=n) for n in names]


def _power_sign_fn(op, var, m, pass_handles: bool):
    @tf.function
    def step(grad, lr):
        a, b = (var.handle, m.handle) if pass_handles else (var, m)
        op(var=a, m=b, lr=lr, logbase=tf.constant(np.log(2.0), var.dtype), sign_decay=tf.constant(0.5, var.dtype),
           beta=tf.constant(0.9, var.dtype), grad=grad)
        return var.read_value()

    return step


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("which", ["stock", "ours"])
def test_resource_power_sign_lowers_and_runs_like_tf(which, dtype):
    rng = np.random.default_rng(21)
    var, m = _vars(rng, (7, 3), dtype, ("dense/kernel", "dense/kernel/m"))
    op = tf.raw_ops.ResourceApplyPowerSign if which == "stock" else tf_plugin.raw_ops.ResourceApplyPowerSign
    step = _power_sign_fn(op, var, m, pass_handles=which == "stock")
    tf_dtype = tf.as_dtype(dtype)
    graph = graph_ir.from_tensorflow(step, tf.TensorSpec((7, 3), tf_dtype), tf.TensorSpec((), tf_dtype))
    types = {n.name: n.type for n in graph.nodes.values()}
    update = graph.nodes_of_type("InplaceApplyPowerSign")
    assert len(update) == 1
    update = update[0]
    var_name, m_name = graph.variable_name(var), graph.variable_name(m)  # "dense/kernel", or "dense/kernel_1"...
    assert var_name.startswith("dense/kernel") and m_name.startswith("dense/kernel/m")
    assert [h.node.name for h in update.inputs][:2] == [var_name, m_name]  # Variables feed var, m
    assert types[var_name] == "Variable" and types[m_name] == "Variable"
    assert [h.node.type for h in update.inputs] == ["Variable", "Variable", "Data", "Const", "Const", "Const", "Data"]
    assert [d.name for d in update.input_descs()] == ["var", "m", "lr", "logbase", "sign_decay", "beta", "grad"]
    assert all(d.dtype.name == dtype for d in update.input_descs())
    assert [update.inputs[k].shape for k in range(2, 6)] == [(1,)] * 4  # the scalar policy: [1]
    data = {n.attrs["index"]: n for n in graph.nodes_of_type("Data")}
    assert data[0].output_descs[0].shape == (7, 3) and data[1].output_descs[0].shape == (1,)
    np.testing.assert_array_equal(graph.node(var_name).attrs["value"], var.numpy())
    assert graph.node("NetOutput").control_inputs == [update]

    session = graph_ir.Session()
    session.add_graph(0, graph)
    np_dtype = var.numpy().dtype
    for k in range(K):
        grad = random_tensor(rng, (7, 3), dtype)
        lr = np_dtype.type(0.05 * (k + 1))
        (read,) = session.run_graph(0, [grad, np.array([lr])])
        tf_read = step(tf.constant(grad), tf.constant(lr)).numpy()
        if which == "ours":  # the same kernel: bitwise, every step
            np.testing.assert_array_equal(read.view(np.uint8), tf_read.view(np.uint8))
    got_var, got_m = session.get_variables([var_name, m_name])
    if which == "ours":
        np.testing.assert_array_equal(got_var.view(np.uint8), var.numpy().view(np.uint8))
        np.testing.assert_array_equal(got_m.view(np.uint8), m.numpy().view(np.uint8))
    else:
        # Stock computes lr * exp * grad, the Ascend kernel (exp * grad) * lr: a rounding apart, each step.
        tol = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 5e-2}[dtype]
        np.testing.assert_allclose(got_var.astype(np.float64), var.numpy().astype(np.float64), rtol=tol, atol=tol)
        if dtype == "float32":  # m: the same float32 formula (stock rounds each half-precision op instead)
            np.testing.assert_array_equal(got_m, m.numpy())
        else:
            np.testing.assert_allclose(got_m.astype(np.float64), m.numpy().astype(np.float64), rtol=tol, atol=tol)


def test_fused_ema_adam_lowers_and_matches_tf_bitwise():
    rng = np.random.default_rng(22)
    var, m, v, s = _vars(rng, (33,), "float32", ("w", "w_m", "w_v", "w_s"))
    v.assign(tf.abs(v))
    step_var = tf.Variable(1, dtype=tf.int64)

    @tf.function
    def train(grad, step):
        tf_plugin.raw_ops.ResourceApplyFusedEmaAdam(var=var, m=m, v=v, s=s, grad=grad, step=step, lr=0.01,
                                                    ema_decay=0.9, beta1=0.8, beta2=0.99, eps=1e-6, mode=0,
                                                    weight_decay=0.05)

    graph = graph_ir.from_tensorflow(train, tf.TensorSpec((33,), tf.float32), tf.TensorSpec((), tf.int64))
    (update,) = graph.nodes_of_type("ApplyFusedEmaAdam")
    names = [graph.variable_name(x) for x in (var, m, v, s)]
    assert [h.node.name for h in update.inputs] == ["grad", *names, "step"]  # IR order: grad first
    assert update.attrs["lr"] == pytest.approx(0.01) and update.attrs["mode"] == 0
    assert update.attrs["weight_decay"] == pytest.approx(0.05) and "use_locking" not in update.attrs
    assert update.inputs[5].shape == (1,) and update.inputs[5].dtype.name == "int64"
    session = graph_ir.Session()
    session.add_graph(7, graph)
    for k in range(1, K + 1):
        grad = random_tensor(rng, (33,), "float32")
        session.run_graph(7, [grad, np.array([k], np.int64)])
        train(tf.constant(grad), tf.constant(k, tf.int64))
    for got, want in zip(session.get_variables(names), (var, m, v, s)):
        np.testing.assert_array_equal(got, want.numpy())
    del step_var


def test_an_op_it_cannot_lower_is_named():
    var, m = tf.Variable(tf.zeros(4)), tf.Variable(tf.zeros(4))

    @tf.function
    def train(grad):
        tf_plugin.raw_ops.ResourceApplyPowerSign(var=var, m=m, lr=0.1, logbase=1.0, sign_decay=1.0, beta=0.9,
                                                 grad=tf.math.igamma(grad, grad))

    with pytest.raises(graph_ir.LoweringError, match=r"cannot lower TF op Igamma \(node 'Igamma'\)"):
        graph_ir.from_tensorflow(train, tf.TensorSpec((4,), tf.float32))

    @tf.function
    def other_optimizer(grad):
        tf.raw_ops.ResourceApplyGradientDescent(var=var.handle, alpha=0.1, delta=grad)

    with pytest.raises(graph_ir.LoweringError, match=r"cannot lower stateful TF op ResourceApplyGradientDescent"):
        graph_ir.from_tensorflow(other_optimizer, tf.TensorSpec((4,), tf.float32))

    @tf.function
    def dynamic(grad):
        tf_plugin.raw_ops.ResourceApplyPowerSign(var=var, m=m, lr=0.1, logbase=1.0, sign_decay=1.0, beta=0.9,
                                                 grad=grad)

    # A grad of unknown length cannot update a var of 4: refused when lowering, at the size the unknown dim took.
    with pytest.raises(graph_ir.LoweringError, match=r"unknown dims at 48: .*'grad' has shape \[48\] but 'var' has "
                                                     r"\[4\]"):
        graph_ir.from_tensorflow(dynamic, tf.TensorSpec((None,), tf.float32))
    with pytest.raises(graph_ir.LoweringError, match=r"argument 'grad' has an unknown rank"):
        graph_ir.from_tensorflow(dynamic, tf.TensorSpec(None, tf.float32))


def test_ref_variables_in_a_tf_graph_and_graph_def():
    """TF1: VariableV2 + Assign initializers; the stock ApplyPowerSign and our two ref ops."""
    rng = np.random.default_rng(23)
    init = random_tensor(rng, (5,), "float32")
    with tf.Graph().as_default() as g:
        var = tf.compat.v1.Variable(init, name="w", use_resource=False)
        m = tf.compat.v1.Variable(np.zeros(5, np.float32), name="w_m", use_resource=False)
        v = tf.compat.v1.Variable(np.zeros(5, np.float32), name="w_v", use_resource=False)
        s = tf.compat.v1.Variable(init, name="w_s", use_resource=False)
        grad = tf.compat.v1.placeholder(tf.float32, (5,), name="grad")
        updates = [
            tf.raw_ops.ApplyPowerSign(var=var, m=m, lr=0.1, logbase=1.0, sign_decay=1.0, beta=0.9, grad=grad).op,
            tf_plugin.raw_ops.ApplyPowerSign(var=var, m=m, lr=0.1, logbase=1.0, sign_decay=1.0, beta=0.9,
                                             grad=grad).op,
            tf_plugin.raw_ops.ApplyFusedEmaAdam(var=var, m=m, v=v, s=s, grad=grad, step=np.int64(1), lr=0.01).op]
    for source in (g, g.as_graph_def()):
        graph = graph_ir.from_tensorflow(source, fetches=[u.name for u in updates])
        variables = [n.name for n in graph.nodes_of_type("Variable")]
        assert len(variables) == 4 and all(name.startswith("w") for name in variables), variables
        if source is g:
            np.testing.assert_array_equal(graph.node(graph.variable_name(var)).attrs["value"], init)
        assert len(graph.nodes_of_type("InplaceApplyPowerSign")) == 2
        assert len(graph.nodes_of_type("ApplyFusedEmaAdam")) == 1
        assert [n.name for n in graph.nodes_of_type("Data")] == ["grad"]


def test_resource_variable_without_constant_initializer_in_a_graph():
    with tf.Graph().as_default() as g:
        var = tf.compat.v1.Variable(tf.random.normal([3]), name="w", use_resource=True)
        m = tf.compat.v1.Variable(tf.zeros([3]), name="w_m", use_resource=True)
        update = tf_plugin.raw_ops.ResourceApplyPowerSign(var=var.handle, m=m.handle, lr=0.1, logbase=1.0,
                                                          sign_decay=1.0, beta=0.9, grad=tf.ones([3]))
    with pytest.raises(graph_ir.LoweringError, match="initializer .* is not a constant .* pass session="):
        graph_ir.from_tensorflow(g, fetches=[update])


def test_table_covers_the_six_op_types_and_the_two_multi_tensor_ops():
    assert sorted(LOWERINGS) == sorted([
        "ApplyPowerSign", "ResourceApplyPowerSign", "TfPluginApplyPowerSign", "TfPluginResourceApplyPowerSign",
        "TfPluginApplyFusedEmaAdam", "TfPluginResourceApplyFusedEmaAdam"])
    assert sorted(MULTI_LOWERINGS) == ["TfPluginResourceApplyMultiFusedEmaAdam", "TfPluginResourceApplyMultiPowerSign"]
    lowering = LOWERINGS["TfPluginResourceApplyFusedEmaAdam"]
    assert lowering.ge_inputs == ("grad", "var", "m", "v", "s", "step") and lowering.attr_inputs == ("lr",)


def test_lowered_graph_serializes_and_reloads(tmp_path):
    var, m = tf.Variable(tf.ones(4), name="w"), tf.Variable(tf.zeros(4), name="w_m")
    step = _power_sign_fn(tf_plugin.raw_ops.ResourceApplyPowerSign, var, m, pass_handles=False)
    graph = graph_ir.from_tensorflow(step, tf.TensorSpec((4,), tf.float32), tf.TensorSpec((), tf.float32))
    graph.save(str(tmp_path / "g.pbtxt"))
    again = graph_ir.load(str(tmp_path / "g.pbtxt"))
    assert again.serialize() == graph.serialize()
