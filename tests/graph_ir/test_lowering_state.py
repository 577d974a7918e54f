"""State is never dropped or taken from the wrong place: TF1 optimizer steps lowered from a tf.Graph by fetches
(with a session's values or the variables' own initializers, never another Assign), assigns inside a step, and
Variable names that never collide, in one graph or across the graphs of one Session."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from op_spec.reference import random_tensor
from tests.helpers.lowering import K, captured, max_relative_difference, run_side_by_side
from tf_plugin.compat.v1 import FusedEmaAdamOptimizer, PowerSignOptimizer
from tf_plugin.sign_decay import get_linear_decay_fn, get_restart_decay_fn

RTOL = 2e-6
TF1 = {
    "PowerSignOptimizer": lambda: PowerSignOptimizer(0.05),
    "PowerSignOptimizer-linear": lambda: PowerSignOptimizer(0.05, sign_decay_fn=get_linear_decay_fn(6)),
    "PowerSignOptimizer-restart": lambda: PowerSignOptimizer(0.05, sign_decay_fn=get_restart_decay_fn(3, 2, 0.8)),
    "PowerSignOptimizer-exponential-decay-lr": lambda: PowerSignOptimizer(tf.compat.v1.train.exponential_decay(
        0.1, tf.compat.v1.train.get_or_create_global_step(), 2, 0.5), sign_decay_fn=get_linear_decay_fn(6)),
    "FusedEmaAdamOptimizer": lambda: FusedEmaAdamOptimizer(0.01, weight_decay=0.01, ema_decay=0.9),
    # Flat state: one multi-tensor op per step, lowered to one GE op per variable on the split slots.
    "PowerSignOptimizer-flat": lambda: PowerSignOptimizer(0.05, sign_decay_fn=get_linear_decay_fn(6), flat_state=True),
    "FusedEmaAdamOptimizer-flat": lambda: FusedEmaAdamOptimizer(0.01, weight_decay=0.01, ema_decay=0.9,
                                                                flat_state=True),
}


@pytest.mark.parametrize("global_step", [True, False], ids=["global_step", "own_counter"])
@pytest.mark.parametrize("name", list(TF1))
def test_tf1_optimizer_step_from_a_graph(name, global_step, tmp_path):
    rng = np.random.default_rng(41)
    inits = [random_tensor(rng, (4, 3), "float32"), random_tensor(rng, (6,), "float32")]
    with tf.Graph().as_default() as g, tf.compat.v1.Session() as sess:
        variables = [tf.compat.v1.Variable(x, use_resource=True) for x in inits]
        grads = [tf.compat.v1.placeholder(tf.float32, x.shape) for x in inits]
        step_var = tf.compat.v1.train.get_or_create_global_step() if global_step else None
        train = TF1[name]().apply_gradients(zip(grads, variables), global_step=step_var)
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(train, {p: np.zeros(p.shape, np.float32) for p in grads})  # one step before lowering
        graph = graph_ir.from_tensorflow(g, fetches=[train], session=sess)
        state = captured(graph, g.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES))
        assert len(state) >= (3 if "PowerSign" in name else 5) + 1  # variables, slots and a counter

        class Reader:  # what run_side_by_side compares against: the values in this session
            def __init__(self, var):
                self.var = var

            def numpy(self):
                return sess.run(self.var)

        readers = [Reader(v) for v in state]
        for r, v in zip(readers, state):
            try:
                graph._variable_names[id(r)] = graph.variable_name(v)
            except KeyError:  # a flat slot, split per variable
                graph._flat_parts[id(r)] = graph.flat_state_parts(v)

        def tf_step(*values):
            sess.run(train, dict(zip(grads, values)))

        def feeds(k):
            rng_k = np.random.default_rng(200 + k)
            return [random_tensor(rng_k, x.shape, "float32") for x in inits]

        differences = run_side_by_side(graph, tf_step, feeds, readers, str(tmp_path))
    assert max(differences.values()) <= RTOL, differences


def test_a_never_fetched_reset_is_not_the_initial_value():
    with tf.Graph().as_default() as g:
        v = tf.compat.v1.Variable(np.full(3, 2.0, np.float32), use_resource=True)
        m = tf.compat.v1.Variable(np.zeros(3, np.float32), use_resource=True)
        reset = v.assign(np.full(3, 5.0, np.float32))
        train = PowerSignOptimizer(0.1).apply_gradients([(tf.ones(3), v)])
        m.initializer  # noqa: B018 - a second variable, not fetched either
    graph = graph_ir.from_tensorflow(g, fetches=[train])
    np.testing.assert_array_equal(graph.node(graph.variable_name(v)).attrs["value"], np.full(3, 2.0, np.float32))
    assert reset.op.name not in graph.nodes and graph.nodes_of_type("Assign") == []
    with pytest.raises(KeyError):
        graph.variable_name(m)  # not fetched: not lowered


def test_assigns_inside_a_step_are_lowered_not_dropped(tmp_path):
    rng = np.random.default_rng(43)
    var, m, o = (tf.Variable(random_tensor(rng, (5,), "float32")) for _ in range(3))
    counter = tf.Variable(np.int64(3))

    @tf.function
    def step(g):
        import tf_plugin

        tf_plugin.raw_ops.ResourceApplyPowerSign(var=var, m=m, lr=0.1, logbase=1.0, sign_decay=0.5, beta=0.9, grad=g)
        o.assign(g * 2.0)
        o.assign_sub(tf.ones(5) * 0.25)
        counter.assign_add(2)  # returns nothing: still runs in TF, so it must be lowered

    graph = graph_ir.from_tensorflow(step, tf.TensorSpec((5,), tf.float32))
    assert sorted(n.type for n in graph.node("NetOutput").control_inputs) == \
        ["Assign", "AssignAdd", "AssignSub", "InplaceApplyPowerSign"]
    differences = run_side_by_side(graph, step, lambda k: [random_tensor(np.random.default_rng(k), (5,),
                                                                         "float32")], [var, m, o, counter],
                                   str(tmp_path))
    assert max(differences.values()) == 0.0, differences
    assert int(counter.numpy()) == 3 + 2 * K


def test_unnamed_variables_never_share_a_ge_variable(tmp_path):
    a, b = tf.Variable(np.ones(3, np.float32)), tf.Variable(np.full(3, 2.0, np.float32))  # both "Variable:0"
    c = tf.Variable(np.full(3, 3.0, np.float32))

    @tf.function
    def first(g):
        a.assign_add(g)
        b.assign_add(g * 2.0)

    @tf.function
    def second(g):
        c.assign_add(g * 3.0)

    one = graph_ir.from_tensorflow(first, tf.TensorSpec((3,), tf.float32))
    two = graph_ir.from_tensorflow(second, tf.TensorSpec((3,), tf.float32))
    names = [one.variable_name(a), one.variable_name(b), two.variable_name(c)]
    assert len(set(names)) == 3 and all(n.startswith("Variable") for n in names), names
    session = graph_ir.Session()
    session.add_graph(0, one)
    session.add_graph(1, two)
    g = np.ones(3, np.float32)
    for _ in range(2):
        session.run_graph(0, [g])
        session.run_graph(1, [g])
        first(tf.constant(g))
        second(tf.constant(g))
    for name, var in zip(names, (a, b, c)):
        assert max_relative_difference(session.get_variables([name])[0], var.numpy()) == 0.0
    again = graph_ir.from_tensorflow(first, tf.TensorSpec((3,), tf.float32))
    assert again.variable_name(a) == names[0]  # one TF variable keeps its GE name
