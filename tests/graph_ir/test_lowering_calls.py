"""Function calls (a tf.function called inside the step: PartitionedCall / StatefulPartitionedCall) are inlined into
the lowered graph: a forward pass through nested inner functions, one stateless and one reading variables, with
their gradients, lowered and run K steps in graph_ir.Session beside K steps in TensorFlow; a write inside a called
function is lowered, not dropped; recursion and nesting too deep are LoweringErrors. graph_ir.missing_ops lists
every op type without a lowering (inside calls too) before lowering, and `python -m graph_ir ops` prints the table.

Tolerance: every variable and the loss within 1e-5 of its own scale after K steps (docs/lowering.md's float32 step
tolerance: matmul and tanh are not bitwise Eigen's)."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir.__main__ import main
from graph_ir.lowering import inline, ops
from tests.helpers import train_steps
from tf_plugin.optimizers import FusedEmaAdam, PowerSign

FLOAT32_TOLERANCE = 1e-5


def _nested_model(seed: int):
    """Dense layers whose forward pass calls an inner tf.function that reads the variables (`dense`), which calls a
    stateless one (`activation`): two levels of calls, in the forward pass and in the gradient."""
    rng = np.random.default_rng(seed)
    w1 = tf.Variable(rng.standard_normal((5, 7)).astype(np.float32) * 0.5, name="calls/w1")
    b1 = tf.Variable(rng.standard_normal(7).astype(np.float32) * 0.1, name="calls/b1")
    w2 = tf.Variable(rng.standard_normal((7, 3)).astype(np.float32) * 0.5, name="calls/w2")

    @tf.function
    def activation(x):
        return tf.tanh(x) * tf.sigmoid(x)

    @tf.function
    def dense(x):
        return activation(tf.matmul(x, w1) + b1)

    def forward(x):
        return tf.matmul(dense(x), w2)

    return forward, [w1, b1, w2]


@pytest.mark.parametrize("optimizer", ["powersign", "fused_ema_adam"])
def test_a_step_calling_inner_functions_lowers_and_runs_like_tf(optimizer, tmp_path):
    forward, variables = _nested_model(11)
    opt = PowerSign(0.01) if optimizer == "powersign" else FusedEmaAdam(0.01, weight_decay=0.01)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(forward(x) - y))
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    specs = [tf.TensorSpec((6, 5), tf.float32), tf.TensorSpec((6, 3), tf.float32)]
    assert {"StatefulPartitionedCall", "PartitionedCall"} <= {
        n.op for n in step.get_concrete_function(*specs).graph.as_graph_def().node}
    graph, differences, loss = train_steps.lower_and_compare(
        step, specs, train_steps.batches(12, *specs), [*variables, *opt.variables], str(tmp_path))
    types = {n.type for n in graph.nodes.values()}
    assert {"MatMulV2", "Tanh", "Sigmoid", "TanhGrad", "SigmoidGrad"} <= types
    assert not types & {"PartitionedCall", "StatefulPartitionedCall"}
    assert any("StatefulPartitionedCall/" in name for name in graph.nodes)  # the callee's nodes, renamed
    assert len(differences) >= len(variables)
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert loss <= FLOAT32_TOLERANCE


def test_a_write_inside_a_called_function_is_lowered_in_order():
    counter = tf.Variable(np.zeros(3, np.float32), name="calls/counter")

    @tf.function
    def count(x):  # its result is never read: the write must still run, as in TF
        counter.assign_add(x)
        return tf.reduce_sum(x)

    @tf.function
    def doubled():  # reads the variable: after the write before the call, as in TF
        return counter.read_value() * 2.0

    @tf.function
    def step(x):
        count(x * 2.0)
        after_count = counter.read_value()  # after the call's write (its "^call" control edge)
        counter.assign_sub(x)
        return after_count, doubled()

    graph = graph_ir.from_tensorflow(step, tf.TensorSpec((3,), tf.float32))
    session = graph_ir.Session()
    session.add_graph(0, graph)
    rng = np.random.default_rng(13)
    for _ in range(train_steps.K):
        x = rng.standard_normal(3).astype(np.float32)
        got = session.run_graph(0, [x])
        for g, w in zip(got, step(x), strict=True):
            np.testing.assert_array_equal(g, w.numpy())
    (got_counter,) = session.get_variables([graph.variable_name(counter)])
    np.testing.assert_array_equal(got_counter, counter.numpy())


def _graph_def_calling(function_body_calls_itself: bool):
    """The GraphDef of a step calling an inner function; optionally the inner function made to call itself."""

    @tf.function
    def inner(x):
        return tf.tanh(x)

    @tf.function
    def step(x):
        return inner(x) + 1.0

    graph_def = step.get_concrete_function(tf.TensorSpec((3,), tf.float32)).graph.as_graph_def()
    if function_body_calls_itself:
        fdef = next(f for f in graph_def.library.function if "inner" in f.signature.name)
        node = fdef.node_def.add(name="again", op="PartitionedCall", input=["x"])
        node.attr["f"].func.name = fdef.signature.name
        node.attr["Tin"].list.type.append(tf.float32.as_datatype_enum)
        node.attr["Tout"].list.type.append(tf.float32.as_datatype_enum)
        fdef.ret["identity"] = "again:output:0"
    output = next(n.name for n in graph_def.node if n.op == "Identity")
    return graph_def, output


def test_recursion_is_refused_naming_the_call():
    graph_def, output = _graph_def_calling(function_body_calls_itself=True)
    with pytest.raises(graph_ir.LoweringError, match=r"PartitionedCall '.*again' calls '__inference_inner.*' "
                                                     r"recursively .*recursion cannot be inlined"):
        graph_ir.from_tensorflow(graph_def, fetches=[f"{output}:0"])


def test_a_graph_def_with_calls_lowers_and_calls_nested_too_deep_are_refused(monkeypatch):
    graph_def, output = _graph_def_calling(function_body_calls_itself=False)
    graph = graph_ir.from_tensorflow(graph_def, fetches=[f"{output}:0"])
    session = graph_ir.Session()
    session.add_graph(0, graph)
    x = np.array([-2.0, 0.0, 0.5], np.float32)
    np.testing.assert_allclose(session.run_graph(0, [x])[0], np.tanh(x) + 1.0, rtol=2e-6)

    forward, _ = _nested_model(14)
    step = tf.function(forward)
    monkeypatch.setattr(inline, "MAX_DEPTH", 1)
    with pytest.raises(graph_ir.LoweringError, match=r"function calls nested more than 1 deep \(__inference_dense"):
        graph_ir.from_tensorflow(step, tf.TensorSpec((2, 5), tf.float32))


def test_missing_ops_lists_every_op_without_a_lowering_with_its_nodes():
    @tf.function
    def inner(x):
        return tf.math.igamma(x, x) + tf.math.igamma(x, 2.0 * x)

    @tf.function
    def step(x):
        return tf.math.zeta(inner(tf.abs(x) + 1.0), 3.0) + tf.tanh(x)

    missing = graph_ir.missing_ops(step, tf.TensorSpec((4,), tf.float32))
    assert list(missing) == ["Igamma", "Zeta"]  # both, sorted: not only the first the lowering would meet
    assert len(missing["Igamma"]) == 2 and all(n.startswith("PartitionedCall/") for n in missing["Igamma"])
    assert missing["Zeta"] == ["Zeta"]
    assert "Igamma (2): PartitionedCall/" in str(missing)
    with pytest.raises(graph_ir.LoweringError, match=r"cannot lower TF op (Igamma|Zeta).*python -m graph_ir ops"):
        graph_ir.from_tensorflow(step, tf.TensorSpec((4,), tf.float32))

    forward, _ = _nested_model(15)
    assert graph_ir.missing_ops(tf.function(forward), tf.TensorSpec((2, 5), tf.float32)) == {}


def test_python_m_graph_ir_ops_prints_every_lowered_op_with_its_ge_op():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["ops"]) == 0
    rows = {line.split()[0]: line.split()[1] for line in out.getvalue().splitlines()[1:]}
    assert set(rows) == set(ops.lowered_types())
    assert rows["MatMul"] == "MatMulV2" and rows["AssignVariableOp"] == "Assign"
    assert rows["StatefulPartitionedCall"].startswith("(inlined")
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        main(["missing"])
