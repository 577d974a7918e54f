"""TF2 control flow lowered to GE functional ops (graph_ir/lowering/control.py): a custom training step with
tf.cond, tf.switch_case and tf.while_loop in the forward pass (their gradients: If, Case and a StatelessWhile with
TensorList accumulators) and a tf.cond that writes a variable in its branches, run K steps in graph_ir.Session beside
K steps of TensorFlow with FusedEmaAdam and PowerSign, both branches taken across the steps. Tolerance: every
variable, slot and counter and the loss within 1e-5 of its own scale (FLOAT32_TOLERANCE). Measured (K = 4): state
within 1.1e-7 scaled (PowerSign; 9.8e-8 FusedEmaAdam), the loss within 1e-7; the counter written inside the cond
exactly."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from tests.graph_ir.test_lowering_steps import FLOAT32_TOLERANCE, OPTIMIZERS
from tests.helpers import train_steps

STEPS = 4
# The TF ops these tests lower and run beside TensorFlow (tests/graph_ir/test_family_ops.py reads it): the custom
# step's (its types asserted, VariableShape from its while_loop's gradient over the variable u), and Case from
# test_a_switch_case_writing_a_variable_lowers_to_case.
TESTED = ("If", "StatelessIf", "Case", "StatelessCase", "While", "StatelessWhile", "VariableShape", "EmptyTensorList",
          "TensorListPushBack", "TensorListPopBack")


def remembered(batch):
    """batch(k), the same batch each time it is asked for k."""
    seen = {}
    return lambda k: seen.setdefault(k, batch(k))


def _custom_step(optimizer):
    rng = np.random.default_rng(50)
    w = tf.Variable(rng.standard_normal((5, 3)).astype(np.float32) * 0.5, name="w")
    u = tf.Variable(rng.standard_normal((3, 3)).astype(np.float32) * 0.5, name="u")
    counter = tf.Variable(0.0, name="counter")

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            h = x @ w
            h = tf.cond(tf.reduce_sum(x[:, 0]) > 0, lambda: tf.tanh(h) * 2.0, lambda: tf.sigmoid(h) - h)
            pick = tf.cast(tf.reduce_sum(tf.cast(x[:, 1] > 0, tf.int32)), tf.int32) % 3
            h = tf.switch_case(pick, [lambda: h * 0.5, lambda: tf.square(h), lambda: h + 1.0])
            _, acc = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, tf.tanh(a @ u) * 0.9 + h), (0, h))
            loss = tf.reduce_mean(tf.square(acc - y))
        variables = [w, u]
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        tf.cond(loss > 1.0, lambda: counter.assign_add(1.0), lambda: counter.assign_sub(0.5))
        return loss

    return step, [w, u, counter]


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_custom_step_with_cond_switch_case_and_while_loop(optimizer, tmp_path):
    opt = OPTIMIZERS[optimizer]()
    step, variables = _custom_step(opt)
    specs = [tf.TensorSpec((6, 5), tf.float32), tf.TensorSpec((6, 3), tf.float32)]
    batch = remembered(train_steps.batches(51, *specs))
    step(*batch(-2))  # builds the optimizer's slots, so that they are compared too
    graph, differences, loss = train_steps.lower_and_compare(step, specs, batch, [*variables, *opt.variables],
                                                             str(tmp_path), steps=STEPS)
    taken = {bool(np.sum(batch(k)[0][:, 0]) > 0) for k in range(STEPS)}
    assert taken == {True, False}  # both sides of the first tf.cond run
    types = {n.type for g in (graph, *graph.subgraphs.values()) for n in g.nodes.values()}
    assert {"If", "StatelessIf", "StatelessCase", "While", "StatelessWhile", "EmptyTensorList", "TensorListPushBack",
            "TensorListPopBack"} <= types, sorted(types)
    assert ("ApplyFusedEmaAdam" if optimizer == "fused_ema_adam" else "InplaceApplyPowerSign") in types
    assert differences[graph.variable_name(variables[2])] == 0.0  # the counter, written inside the cond's branches
    assert len(differences) > len(variables), differences  # the slots too
    assert max(differences.values()) <= FLOAT32_TOLERANCE, differences
    assert loss <= FLOAT32_TOLERANCE


def test_subgraphs_hold_the_variables_their_functions_write():
    v = tf.Variable(np.arange(3, dtype=np.float32), name="written_in_branch")

    @tf.function
    def step(x):
        tf.cond(tf.reduce_sum(x) > 0, lambda: v.assign(v * x), lambda: v.assign_add(x))
        return v.read_value()

    graph = graph_ir.from_tensorflow(step, tf.TensorSpec((3,), tf.float32))
    name = graph.variable_name(v)
    (node,) = graph.nodes_of_type("If")
    then_branch, else_branch = (graph.subgraphs[s] for s in node.subgraphs)
    assert {"Data", "Variable", "Assign", "NetOutput"} <= {n.type for n in then_branch.nodes.values()}
    assert [n.name for n in then_branch.nodes_of_type("Variable")] == [name]
    assert [n.name for n in else_branch.nodes_of_type("Variable")] == [name]
    session = graph_ir.Session()
    session.add_graph(0, graph)
    for x in (np.array([1.0, -2.0, 3.0], np.float32), np.array([-1.0, 0.5, -0.25], np.float32)):
        got = session.run_graph(0, [x])[0]
        want = step(x).numpy()
        np.testing.assert_array_equal(got, want)  # the read after the If sees the branch's write
        np.testing.assert_array_equal(session.get_variables([name])[0], v.numpy())


def test_a_switch_case_writing_a_variable_lowers_to_case():
    """A tf.switch_case whose branches write a variable is TF's (stateful) Case, lowered to GE's Case; an index out
    of range runs the last branch, as TF's Case does."""
    v = tf.Variable(np.arange(3, dtype=np.float32), name="written_in_case")

    @tf.function
    def step(k, x):
        tf.switch_case(k, [lambda: v.assign(v * x), lambda: v.assign_add(x), lambda: v.assign_sub(x)])
        return v.read_value()

    graph = graph_ir.from_tensorflow(step, tf.TensorSpec((), tf.int32), tf.TensorSpec((3,), tf.float32))
    assert len(graph.nodes_of_type("Case")) == 1
    session = graph_ir.Session()
    session.add_graph(0, graph)
    x = np.array([1.5, -2.0, 0.0], np.float32)
    for k in (0, 1, 2, 7, -1):
        np.testing.assert_array_equal(session.run_graph(0, [np.int32(k), x])[0], step(np.int32(k), x).numpy())
        np.testing.assert_array_equal(session.get_variables([graph.variable_name(v)])[0], v.numpy())


def test_a_branch_that_does_nothing():
    v = tf.Variable(1.0, name="added_to_in_one_branch")

    @tf.function
    def step(x):
        def add():
            v.assign_add(x)

        tf.cond(x > 0, add, lambda: None)  # the else branch is an empty subgraph (a NetOutput alone)
        return v.read_value()

    graph = graph_ir.from_tensorflow(step, tf.TensorSpec((), tf.float32))
    session = graph_ir.Session()
    session.add_graph(0, graph)
    for x in (np.float32(2.0), np.float32(-1.0), np.float32(0.0), np.float32(0.5)):
        assert session.run_graph(0, [x])[0] == step(x).numpy()


def test_a_loop_whose_state_changes_shape_is_refused_naming_the_node():
    @tf.function
    def grow(x):
        return tf.while_loop(lambda a: tf.shape(a)[0] < 8, lambda a: (tf.concat([a, a], 0),), (x,),
                             shape_invariants=(tf.TensorShape([None]),), name="grow")

    with pytest.raises(graph_ir.LoweringError, match=r"While 'grow'"):
        graph_ir.from_tensorflow(grow, tf.TensorSpec((2,), tf.float32))


def test_a_tensor_array_read_in_both_branches():
    @tf.function
    def step(x):
        array = tf.TensorArray(tf.float32, size=2)  # TF2's TensorArray is a TensorList: this one lowers
        array = array.write(0, x).write(1, x * 2)
        return tf.cond(tf.reduce_sum(x) > 0, lambda: array.stack(), lambda: array.stack() * 0)

    graph = graph_ir.from_tensorflow(step, tf.TensorSpec((3,), tf.float32))
    session = graph_ir.Session()
    session.add_graph(0, graph)
    for x in (np.array([1.0, 2.0, 3.0], np.float32), np.array([-1.0, 0.0, -3.0], np.float32)):
        np.testing.assert_array_equal(session.run_graph(0, [x])[0], step(x).numpy())
