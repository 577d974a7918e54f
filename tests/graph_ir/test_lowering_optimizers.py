"""Complete optimizer steps lowered to GE and run K steps in graph_ir.Session against K steps in TensorFlow: the
Keras and TF1 optimizers of this package with float learning rates, Keras schedules and every sign decay, read
back from .air and .pbtxt files. Every variable, slot and counter is compared. FusedEmaAdam's learning rates
(schedules, frozen and fed lr variables): test_lowering_schedules.py."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from op_spec.reference import random_tensor
from tests.helpers import train_steps
from tests.helpers.lowering import captured, run_side_by_side
from tests.helpers.models import seeded_dense_model
from tf_plugin import sign_decay
from tf_plugin.optimizers import FusedEmaAdam, PowerSign

SHAPES = ((5, 3), (7,), ())  # a scalar too (a logit scale): its gradient reaches the kernels 0-d
# Standard ops run in NumPy, TF's in Eigen: exp, cos and pow can round differently by an ulp, and the difference
# carries through the K steps. The optimizer kernels themselves are the same code (bitwise).
RTOL = 2e-6

KERAS = {
    "powersign": lambda: PowerSign(0.05),
    "powersign-linear": lambda: PowerSign(0.05, sign_decay="linear", decay_steps=6),
    "powersign-cosine": lambda: PowerSign(0.05, sign_decay="cosine", decay_steps=6),
    "powersign-restart": lambda: PowerSign(0.05, sign_decay="restart", decay_steps=3),
    "powersign-cosine-zero-after": lambda: PowerSign(0.05, sign_decay=sign_decay.get_cosine_decay_fn(6, 1, 0.4)),
    "powersign-exponential-decay": lambda: PowerSign(keras.optimizers.schedules.ExponentialDecay(0.1, 2, 0.5)),
    "powersign-staircase-cosine": lambda: PowerSign(
        keras.optimizers.schedules.ExponentialDecay(0.1, 2, 0.5, staircase=True), sign_decay="cosine",
        decay_steps=5),
    "powersign-cosine-decay-lr": lambda: PowerSign(keras.optimizers.schedules.CosineDecay(0.1, 10)),
    "fused_ema_adam": lambda: FusedEmaAdam(0.01, weight_decay=0.01, ema_decay=0.9),
    "fused_ema_adam-l2": lambda: FusedEmaAdam(0.01, weight_decay=0.01, mode="l2", bias_correction=False),
}


def _keras_step(make):
    rng = np.random.default_rng(31)
    variables = [keras.Variable(random_tensor(rng, s, "float32")) for s in SHAPES]
    optimizer = make()
    optimizer.build(variables)

    @tf.function
    def step(*grads):
        optimizer.apply_gradients(zip(grads, variables))

    specs = [tf.TensorSpec(s, tf.float32) for s in SHAPES]
    return step, specs, variables, optimizer


def _grads(k: int) -> list[np.ndarray]:
    rng = np.random.default_rng(100 + k)
    return [random_tensor(rng, s, "float32") for s in SHAPES]


@pytest.mark.parametrize("name", list(KERAS))
def test_keras_optimizer_step(name, tmp_path):
    step, specs, variables, optimizer = _keras_step(KERAS[name])
    graph = graph_ir.from_tensorflow(step, *specs)
    compared = captured(graph, [*variables, *optimizer.variables])
    graph.variable_name(optimizer.iterations)  # the counter is lowered too (an Assign of iterations + 1)
    # The flat slots (m_float32, ...) are split into one GE Variable per model variable, and compared whole.
    flat = [v for v in optimizer.variables if v.name.endswith("_float32")]
    assert flat and {id(v) for v in flat} <= {id(v) for v in compared}
    assert all(len(graph.flat_state_parts(v)) == len(SHAPES) for v in flat)
    differences = run_side_by_side(graph, step, _grads, compared, str(tmp_path))
    assert max(differences.values()) <= RTOL, differences


def test_multi_tensor_step_with_a_variable_left_out_and_no_decay(tmp_path):
    """A step that updates two of three variables (state_offsets), one excluded from weight decay (no_decay): the
    lowering gives one ApplyFusedEmaAdam per updated variable, weight_decay 0 on the excluded one, and the left-out
    variable's parts of the flat slots stay as they are."""
    shapes = ((5, 3), (4,), (7,))
    rng = np.random.default_rng(32)
    variables = [keras.Variable(random_tensor(rng, s, "float32"), name=n) for s, n in zip(shapes, ("a", "b", "bias"))]
    optimizer = FusedEmaAdam(0.01, weight_decay=0.05, ema_decay=0.9)
    optimizer.exclude_from_weight_decay(var_names=["bias"])
    optimizer.build(variables)

    @tf.function
    def step(g0, g2):
        optimizer.apply_gradients([(g0, variables[0]), (g2, variables[2])])

    specs = [tf.TensorSpec(shapes[0], tf.float32), tf.TensorSpec(shapes[2], tf.float32)]
    graph = graph_ir.from_tensorflow(step, *specs)
    ops = graph.nodes_of_type("ApplyFusedEmaAdam")
    assert sorted(n.attrs["weight_decay"] for n in ops) == [0.0, pytest.approx(0.05)]

    def feeds(k):
        rng_k = np.random.default_rng(300 + k)
        return [random_tensor(rng_k, shapes[0], "float32"), random_tensor(rng_k, shapes[2], "float32")]

    compared = captured(graph, [*variables, *optimizer.variables])
    flat = [v for v in optimizer.variables if v.name.endswith("_float32")]
    assert all(len(graph.flat_state_parts(v)) == 2 for v in flat)
    b_before = variables[1].numpy().copy()
    differences = run_side_by_side(graph, step, feeds, compared, str(tmp_path))
    assert max(differences.values()) <= RTOL, differences
    np.testing.assert_array_equal(variables[1].numpy(), b_before)  # left out: untouched in TF, absent in GE
    m = next(v for v in flat if v.name.startswith("m_")).numpy()
    np.testing.assert_array_equal(m[15:19], 0.0)


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "per_variable"])
@pytest.mark.parametrize("use_ema", [False, True], ids=["s", "use_ema"])
def test_a_model_without_keras_input_lowers_after_its_first_step(flat, use_ema, tmp_path):
    """A model without keras.Input builds its variables, and FusedEmaAdam its slots, inside the first traced step,
    whose EMA slot copies the weights at the first update under a tf.cond (tf_plugin/pending_average.py). Lowered
    after that step, as the README says, the step is traced again without the copy (it is behind) and runs K steps
    in the Session as in TF: every weight, slot and counter within 1e-5 of its scale."""
    model = seeded_dense_model(with_input=False)
    optimizer = FusedEmaAdam(0.01, weight_decay=0.01, ema_decay=0.8, use_ema=use_ema, flat_state=flat)
    step = train_steps.train_step(model, keras.losses.MeanSquaredError(), optimizer)
    specs = [tf.TensorSpec((6, 5), tf.float32), tf.TensorSpec((6, 3), tf.float32)]
    batch = train_steps.batches(9, *specs)
    step(*batch(-2))  # the first step: builds the variables and the slots, and copies the weights into s
    state = [*model.variables, *optimizer.variables]
    graph, differences, loss = train_steps.lower_and_compare(step, specs, batch, state, str(tmp_path))
    # 4 weights, the iteration count and the slots m, v and s: flat (one of each) or per variable
    assert len(differences) == 5 + (3 if flat else 3 * 4), sorted(differences)
    assert not any("pending_ema_copy" in n for n in graph.nodes), "the first step's copy was lowered"
    assert max(differences.values()) <= 1e-5 and loss <= 1e-5, (differences, loss)


def test_the_lowering_knows_the_scope_of_the_first_steps_copy():
    from graph_ir.lowering import trace
    from tf_plugin import pending_average

    assert trace.PENDING_SCOPE == pending_average.PENDING_SCOPE
