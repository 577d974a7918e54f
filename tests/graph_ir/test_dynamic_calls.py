"""Calls of a template graph (dims known only at run time, graph_ir/dynamic) that do not fit it, the plan cache,
and memory that follows the call's size.

A bad call (a known dim contradicted, a wrong rank, unknown dims that must agree but do not) is refused before
anything runs, naming the input and the dim, and leaves every Session variable as it was. TensorFlow does worse on
the one such call that reaches its runtime (5 rows of x, 4 labels, in a tf.function traced with a None batch): it
raises, but the optimizer's iteration counter has already been incremented (the counter's assign_add does not
depend on the failing loss, so TF ran it first). Session(max_shape_plans=3) keeps 3 plans, least recently used
dropped, and a size whose plan was dropped comes back right. After a big batch, a small one gives the big one's
pages back to the system (RSS measured in a child process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from tests.helpers import ROOT, dynamic_steps, train_steps
from tests.helpers.lowering import session_values
from tf_plugin.optimizers import FusedEmaAdam, PowerSign

XENT = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
SPECS = [tf.TensorSpec((None, 12), tf.float32), tf.TensorSpec((None,), tf.int32)]


def _mlp_step(optimizer, seed: int):
    """(model, optimizer, the training step traced once with a None batch: TF runs every batch size through the
    same concrete function, as the lowered template does)."""
    keras.utils.set_random_seed(seed)
    model = train_steps.mlp()
    step = tf.function(train_steps.train_step(model, XENT, optimizer), input_signature=SPECS)
    step(*dynamic_steps.batches(seed, SPECS, (0, 5))([(6, 12), (6,)]))  # builds the optimizer's state
    return model, optimizer, step


def _session(step, folder: str) -> tuple[graph_ir.Graph, graph_ir.Session, list[str]]:
    """(the lowered template, a Session running its .air copy, the names of every Variable it holds)."""
    graph, loaded = dynamic_steps.lower_template(step, SPECS, folder)
    session = graph_ir.Session()
    session.add_graph(0, loaded)
    return graph, session, [n.name for n in loaded.nodes.values() if n.type == "Variable"]


def _values(session: graph_ir.Session, names: list[str]) -> list[np.ndarray]:
    return [np.array(v, copy=True) for v in session.get_variables(names)]


@pytest.mark.parametrize(("x_shape", "y_shape", "error", "match"), [
    ((5, 9), (5,), ValueError,
     r"input 0 \(x\) has shape \[5, 9\]: dim 1 is 9, but the graph's Data desc \[-1, 12\] says 12"),
    ((5, 12, 1), (5,), ValueError,
     r"input 0 \(x\) has shape \[5, 12, 1\]: rank 3, but the graph's Data desc \[-1, 12\] has rank 2"),
    ((5,), (5, 1), ValueError, r"input 0 \(x\) has shape \[5\]: rank 1, but .* has rank 2"),
    ((5, 12), (4,), graph_ir.GraphError,
     (r"at the call's input shapes \(x \[5, 12\], y \[4\]; the dims unknown in the graph are x dim 0 = 5, y dim 0 "
      r"= 4\): SparseSoftmaxCrossEntropyWithLogits '[^']+': ")),
], ids=["known_dim", "rank", "rank_1", "rows_vs_labels"])
def test_a_bad_call_is_refused_naming_the_input_and_dim_and_changes_nothing(x_shape, y_shape, error, match,
                                                                            tmp_path):
    """Refused before anything runs: every variable (model, slots, counter) is as before; a good call after it
    still runs."""
    _, _, step = _mlp_step(PowerSign(0.01), 71)
    _, session, names = _session(step, str(tmp_path))
    good = dynamic_steps.batches(72, SPECS, (0, 5))([(3, 12), (3,)])
    session.run_graph(0, good)
    before = _values(session, names)
    bad = [np.ones(x_shape, np.float32), np.zeros(y_shape, np.int32)]
    with pytest.raises(error, match=match):
        session.run_graph(0, bad)
    for name, b, a in zip(names, before, _values(session, names)):
        np.testing.assert_array_equal(a, b, err_msg=name)
    session.run_graph(0, good)
    assert any(not np.array_equal(a, b) for a, b in zip(before, _values(session, names)))


def test_tf_moves_its_iteration_counter_on_a_bad_call_and_we_do_not(tmp_path):
    """5 rows of x and 4 labels: both refuse, but TF (TF 2.21, Keras 3) has already incremented
    optimizer.iterations when it raises; the Session's counter and every other variable are unchanged."""
    model, opt, step = _mlp_step(FusedEmaAdam(0.01), 73)
    graph, session, names = _session(step, str(tmp_path))
    before = _values(session, names)
    tf_before = int(opt.iterations.numpy())
    tf_kernel = model.variables[0].numpy().copy()
    bad = [np.ones((5, 12), np.float32), np.zeros(4, np.int32)]
    with pytest.raises(tf.errors.InvalidArgumentError):
        step(*bad)
    assert int(opt.iterations.numpy()) == tf_before + 1  # TF's counter moved on a step that failed
    np.testing.assert_array_equal(model.variables[0].numpy(), tf_kernel)  # while the weights did not
    with pytest.raises(graph_ir.GraphError, match=r"x dim 0 = 5, y dim 0 = 4"):
        session.run_graph(0, bad)
    assert int(session_values(graph, session, [opt.iterations])[0]) == tf_before  # ours did not
    for name, b, a in zip(names, before, _values(session, names)):
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_an_unknown_rank_is_refused_naming_the_argument():
    """tf.TensorSpec(None): a step that traces at any rank (a Keras model would refuse it itself) is refused at
    lowering, naming the argument, as a LoweringError."""
    scale = tf.Variable(2.0)

    @tf.function
    def step(weights, x):
        scale.assign_add(tf.reduce_sum(x) * 0.0)
        return tf.reduce_sum(x * scale) + tf.reduce_sum(weights)

    with pytest.raises(graph_ir.LoweringError, match=r"argument 'x' has an unknown rank"):
        graph_ir.from_tensorflow(step, tf.TensorSpec((None, 3), tf.float32), tf.TensorSpec(None, tf.float32))


def test_the_plan_cache_keeps_at_most_max_shape_plans(tmp_path):
    """Ten batch sizes through Session(max_shape_plans=3), each step compared with TF: three plans stay (the three
    last sizes), and sizes whose plans were dropped (1, then 5) run right again."""
    model, opt, step = _mlp_step(FusedEmaAdam(0.01, weight_decay=0.01), 75)
    graphs = dynamic_steps.lower_template(step, SPECS, str(tmp_path))
    session = graph_ir.Session(max_shape_plans=3)
    sizes = [*range(1, 11), 1, 5]
    dynamic_steps.compare_at_shapes(graphs, step, dynamic_steps.batches(76, SPECS, (0, 5)),
                                    [[(n, 12), (n,)] for n in sizes], [*model.variables, *opt.variables],
                                    steps=1, session=session)
    plans = session._plans[0].plans
    assert list(plans) == [(((n, 12), (n,))) for n in (10, 1, 5)]


CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import graph_ir

    def rss_mib():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024

    session = graph_ir.Session(max_run_bytes=4 << 30)
    session.add_graph(0, graph_ir.load(sys.argv[1]))
    rng = np.random.default_rng(0)
    session.run_graph(0, [rng.standard_normal((64, 256), dtype=np.float32)])
    base = rss_mib()
    x = rng.standard_normal((int(sys.argv[2]), 256), dtype=np.float32)
    out = session.run_graph(0, [x])
    del x, out
    big = rss_mib()
    session.run_graph(0, [rng.standard_normal((64, 256), dtype=np.float32)])
    print(base, big, rss_mib())
""")


@pytest.mark.slow
def test_memory_follows_the_call(tmp_path):
    """A batch of 32768 rows (hundreds of MB of activations), then one of 64: the process's RSS after the small
    call is back near what it was before the big one (the Session trims the heap after a run that needed under half
    the largest peak). A child process, so that nothing else this test process holds moves its RSS."""
    keras.utils.set_random_seed(77)
    w1 = tf.Variable(np.random.default_rng(1).standard_normal((256, 2048)).astype(np.float32) / 16)
    w2 = tf.Variable(np.random.default_rng(2).standard_normal((2048, 8)).astype(np.float32) / 45)

    @tf.function
    def forward(x):
        return tf.reduce_mean(tf.tanh(x @ w1) @ w2, axis=0)

    graph = graph_ir.from_tensorflow(forward, tf.TensorSpec((None, 256), tf.float32))
    path = str(tmp_path / "forward.air")
    graph.save(path)
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-c", CHILD, path, "32768"], capture_output=True, text=True, env=env,
                          timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    base, big, small = (float(v) for v in done.stdout.split())
    assert big - base >= 200, (base, big, small)  # the big call's pages were held after it
    assert small - base <= 0.25 * (big - base), (base, big, small)  # and given back after the small one


@pytest.mark.parametrize("batch", [2**20, None])
def test_a_huge_broadcast_view_is_refused_by_name_before_it_is_copied(batch):
    """A zero-stride view of 2^40 elements holds 4 bytes: the Session copies its inputs, so the view is refused,
    naming the input, before anything is copied or planned. With a None batch (GE's -1) its shape would otherwise
    plan an instance whose bound grows with the input; a static graph declaring such an input is allowed as a graph
    (its declared inputs count in its bound), not such a feed. A broadcast view within the bound runs as in TF."""
    fn = tf.function(lambda x: tf.reduce_sum(x))
    graph = graph_ir.from_tensorflow(fn, tf.TensorSpec((batch, 2**20), tf.float32))
    session = graph_ir.Session()
    session.add_graph(0, graph)
    huge = np.broadcast_to(np.float32(1.0), (2**20, 2**20))
    with pytest.raises(ValueError, match=r"input 0 is a view of 4 bytes standing for 1099511627776 elements "
                                         r"\(4398046511104 bytes; .*strides \[0, 0\]\).*copies its inputs"):
        session.run_graph(0, [huge])
    if batch is None:
        small = np.broadcast_to(np.float32(0.5), (3, 2**20))
        np.testing.assert_allclose(session.run_graph(0, [small])[0], fn(small).numpy(), rtol=1e-6)
