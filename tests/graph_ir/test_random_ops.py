"""The random family (graph_ir/opset/random.py, executors/random.py, executors/philox.py): TF's V2 stateless random
ops, each alone in a tf.function, lowered, run in graph_ir.Session and compared with tf.raw_ops on several seeds,
keys and counters (a counter whose low word carries, one that wraps to 0), shapes (scalar, empty, odd, sizes not a
multiple of 4, larger than a fold) and every dtype TF's CPU kernels draw (the stateful ops: test_random_stateful.py).

Bitwise: StatelessRandomGetKeyCounter, StatelessRandomUniformV2 (float32/float16/bfloat16/float64),
StatelessRandomUniformIntV2 (int32/int64), StatelessRandomUniformFullIntV2 (int32/int64/uint32/uint64).
The normals go through libm (TF: glibc's logf and sincosf, which are not correctly rounded; float64: glibc's log and
sincos), ours through NumPy's float64 log, sin and cos: an element is then an ulp or two of its log, sin or cos
apart in about 1.5% of float32 elements (0.2% of float64), so they are held to the table's 2e-6 of scale, every
element within 8 ulps and 97% bitwise (a wrong lane, counter or rejection would leave almost none equal). float16 and
bfloat16 normals are those float32 values rounded: bitwise but where the two float32 values straddle a 16-bit rounding
boundary (measured: 1 in 40001 float16 truncated normals), one 16-bit ulp apart there."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir.executors import EXECUTORS, WORKSPACE, philox
from graph_ir.ir.dtypes import as_dtype
from tests.helpers.train_steps import scaled_difference

ROUNDING = 2e-6  # docs/lowering.md's table tolerance for the normals
FLOATS = (tf.float32, tf.float16, tf.bfloat16, tf.float64)
SHAPES = ((), (0,), (1,), (5,), (3, 7), (2, 0, 3), (4097,))
SEEDS = {tf.int32: ((0, 0), (7, 0), (123, -5), (-1, -1), (2**31 - 1, -2**31)),
         tf.int64: ((-1, 2**40), (2**63 - 1, -2**63), (5, 3))}
# key, counter: zero, a random pair, a low word that carries into the high word, a 128-bit counter that wraps to 0
COUNTERS = (([0], [0, 0]), ([0x0123456789ABCDEF], [0xFEDCBA9876543210, 77]), ([42], [2**64 - 3, 5]),
            ([2**64 - 1], [2**64 - 2, 2**64 - 1]))
_KEY_COUNTER_SPECS = [tf.TensorSpec((1,), tf.uint64), tf.TensorSpec((2,), tf.uint64)]
TESTED = ("StatelessRandomGetKeyCounter", "StatelessRandomGetKeyCounterAlg", "StatelessRandomGetAlg",
          "StatelessRandomUniformV2", "StatelessRandomNormalV2",
          "StatelessTruncatedNormalV2", "StatelessRandomUniformIntV2", "StatelessRandomUniformFullIntV2",
          "RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt")


def lowered(fn, specs):
    """fn as a tf.function, and its lowering in a Session: run(*args) -> (the Session's results, TF's)."""
    step = tf.function(fn)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.from_tensorflow(step, *specs))
    return lambda *args: (session.run_graph(0, list(args)), [t.numpy() for t in tf.nest.flatten(step(*args))])


def each_key_counter(fn):
    """fn(key, counter) lowered once, then run on every COUNTERS case: (got, want) of its one output each."""
    run = lowered(fn, _KEY_COUNTER_SPECS)
    for case in range(len(COUNTERS)):
        (got,), (want,) = run(*_key_counter(case))
        yield got, want


def assert_bitwise(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    bits = np.dtype(f"u{want.dtype.itemsize}")
    np.testing.assert_array_equal(got.view(bits), want.view(bits))


def _key_counter(case: int) -> list[np.ndarray]:
    key, counter = COUNTERS[case]
    return [np.array(key, np.uint64), np.array(counter, np.uint64)]


def _draw(op: str, shape, dtype, alg: int = 1):
    return lambda key, counter: getattr(tf.raw_ops, op)(shape=shape, key=key, counter=counter, alg=alg, dtype=dtype)


@pytest.mark.parametrize("dtype", list(SEEDS))
def test_key_counter_from_seeds(dtype):
    run = lowered(lambda s: tf.raw_ops.StatelessRandomGetKeyCounter(seed=s), [tf.TensorSpec((2,), dtype)])
    for seed in SEEDS[dtype]:
        got, want = run(np.array(seed, dtype.as_numpy_dtype))
        for g, w in zip(got, want, strict=True):
            assert_bitwise(g, w)


def test_key_counter_alg_and_alg():
    """TF's kernels return alg 1 (Philox); the key and counter are StatelessRandomGetKeyCounter's."""
    run = lowered(lambda s: [*tf.raw_ops.StatelessRandomGetKeyCounterAlg(seed=s), tf.raw_ops.StatelessRandomGetAlg()],
                  [tf.TensorSpec((2,), tf.int64)])
    for seed in SEEDS[tf.int64]:
        got, want = run(np.array(seed, np.int64))
        assert len(got) == 4 and got[2] == 1 and got[3] == 1
        for g, w in zip(got, want, strict=True):
            assert_bitwise(np.asarray(g), w)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_uniform_is_bitwise(dtype):
    for shape in SHAPES:
        for got, want in each_key_counter(_draw("StatelessRandomUniformV2", shape, dtype)):
            assert_bitwise(got, want)


def test_dropout_chain_from_a_seed_is_bitwise():
    """seed -> key, counter -> uniform with alg auto-select (3): what Keras's dropout traces to."""
    run = lowered(lambda s: tf.random.stateless_uniform((6, 5), seed=s), [tf.TensorSpec((2,), tf.int32)])
    for seed in SEEDS[tf.int32]:
        (got,), (want,) = run(np.array(seed, np.int32))
        assert_bitwise(got, want)


def _assert_close_normals(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    if not want.size:
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    eps = float(np.finfo(want.dtype).eps)
    if want.dtype.itemsize >= 4:
        assert scaled_difference(got, want) <= ROUNDING
        assert np.all(np.abs(g - w) <= 8 * eps * np.maximum(np.abs(w), 1.0))
    else:  # the float32 value rounded: one 16-bit ulp apart where the float32 values straddle a rounding boundary
        assert np.all(np.abs(g - w) <= eps * np.maximum(np.abs(w), 1.0))
    assert np.mean(g == w) >= 0.97


@pytest.mark.parametrize("op", ["StatelessRandomNormalV2", "StatelessTruncatedNormalV2"])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_normals_within_an_ulp_of_libm(op, dtype):
    for shape in (*SHAPES, (40001,)):
        for got, want in each_key_counter(_draw(op, shape, dtype)):
            _assert_close_normals(got, want)
            if op == "StatelessTruncatedNormalV2" and got.size:  # |y| < 2 before a 16-bit float rounds it
                bound = np.abs(got.astype(np.float64))
                assert np.all(bound < 2.0 if dtype.size >= 4 else bound <= 2.0)


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64], ids=lambda d: d.name)
def test_uniform_int_is_bitwise(dtype):
    info = np.iinfo(dtype.as_numpy_dtype)
    ranges = ((-5, 7), (0, 1), (3, 4), (-1000, 10**6), (int(info.min), int(info.max)), (int(info.min), 0))
    bound = tf.TensorSpec((), dtype)
    for shape in SHAPES:
        run = lowered(lambda key, counter, lo, hi, shape=shape: tf.raw_ops.StatelessRandomUniformIntV2(
            shape=shape, key=key, counter=counter, alg=1, minval=lo, maxval=hi), [*_KEY_COUNTER_SPECS, bound, bound])
        for lo, hi in ranges:
            for case in range(len(COUNTERS)):
                (got,), (want,) = run(*_key_counter(case), *np.array([lo, hi], dtype.as_numpy_dtype))
                assert_bitwise(got, want)


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.uint32, tf.uint64], ids=lambda d: d.name)
def test_uniform_full_int_is_bitwise(dtype):
    for shape in SHAPES:
        for got, want in each_key_counter(_draw("StatelessRandomUniformFullIntV2", shape, dtype)):
            assert_bitwise(got, want)


def test_draws_across_chunks_are_tf_draws(monkeypatch):
    """Drawing CHUNK_BLOCKS Philox calls at a time (here 3) gives the same values: chunk edges inside a group of
    the truncated normal's rejection regions and of float64's two-per-call outputs included."""
    monkeypatch.setattr(philox, "CHUNK_BLOCKS", 3)
    for op, dtype in (("StatelessRandomUniformV2", tf.float64), ("StatelessRandomUniformV2", tf.bfloat16),
                      ("StatelessRandomUniformFullIntV2", tf.int64)):
        for got, want in each_key_counter(_draw(op, (1001,), dtype)):
            assert_bitwise(got, want)
    for op in ("StatelessRandomNormalV2", "StatelessTruncatedNormalV2"):
        for dtype in (tf.float32, tf.float64):
            for got, want in each_key_counter(_draw(op, (1001,), dtype)):
                _assert_close_normals(got, want)


def test_alg_auto_select_is_philox_and_a_runtime_alg_is_checked():
    def fn(key, counter, alg):
        return tf.raw_ops.StatelessRandomUniformV2(shape=(9,), key=key, counter=counter, alg=alg, dtype=tf.float32)

    specs = [*_KEY_COUNTER_SPECS, tf.TensorSpec((), tf.int32)]
    step = tf.function(fn)
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.from_tensorflow(step, *specs))
    args = _key_counter(1)
    philox_draw, = session.run_graph(0, [*args, np.int32(1)])
    auto_draw, = session.run_graph(0, [*args, np.int32(3)])
    assert_bitwise(philox_draw, step(*args, np.int32(3)).numpy())
    assert_bitwise(auto_draw, philox_draw)
    with pytest.raises(graph_ir.GraphError, match=r"StatelessRandomUniformV2 '.*': input 'alg' is 2, expected 1"):
        session.run_graph(0, [*args, np.int32(2)])
    with pytest.raises(tf.errors.InvalidArgumentError):  # TF has no CPU ThreeFry either
        step(*args, np.int32(2))


def test_a_const_threefry_alg_is_refused_naming_the_node():
    with pytest.raises((graph_ir.GraphError, graph_ir.LoweringError), match=r"input 'alg' is 2"):
        graph_ir.from_tensorflow(tf.function(_draw("StatelessRandomNormalV2", (4,), tf.float32, alg=2)),
                                 *_KEY_COUNTER_SPECS)


def test_uniform_int_needs_minval_below_maxval():
    def fn(key, counter, lo, hi):
        return tf.raw_ops.StatelessRandomUniformIntV2(shape=(3,), key=key, counter=counter, alg=1, minval=lo,
                                                      maxval=hi)

    specs = [*_KEY_COUNTER_SPECS, tf.TensorSpec((), tf.int64), tf.TensorSpec((), tf.int64)]
    session = graph_ir.Session()
    session.add_graph(0, graph_ir.from_tensorflow(tf.function(fn), *specs))
    with pytest.raises(graph_ir.GraphError, match=r"'minval' and 'maxval' must have minval < maxval.*got 4 and 4"):
        session.run_graph(0, [*_key_counter(0), np.int64(4), np.int64(4)])
    with pytest.raises(tf.errors.InvalidArgumentError, match="Need minval < maxval"):
        fn(*_key_counter(0), np.int64(4), np.int64(4))


def test_a_seed_of_the_wrong_shape_is_refused():
    """TF's shape function refuses it when tracing; a GE graph built directly meets the verifier."""
    graph = graph_ir.Graph("g")
    with graph, pytest.raises(graph_ir.GraphError, match=r"input 'seed' must have shape \[2\], got \[3\]"):
        graph.add_node("StatelessRandomGetKeyCounter", [graph_ir.Data(0, "int32", (3,))])


def test_generator_random_ops_stay_refused():
    step = tf.function(lambda x: x + tf.raw_ops.RngSkip(resource=x, algorithm=1, delta=1))
    with pytest.raises(graph_ir.LoweringError):
        graph_ir.from_tensorflow(step, tf.TensorSpec((3,), tf.float32))


class _Node:
    """The little of a node an executor reads."""

    def __init__(self, op: str, dtype: str, n: int):
        self.type, self.name = op, "draw"
        self.output_descs = [graph_ir.TensorDesc("y", as_dtype(dtype), (n,))]


@pytest.mark.parametrize("op, dtype", [("StatelessRandomUniformV2", "float64"), ("StatelessRandomNormalV2", "float32"),
                                       ("StatelessTruncatedNormalV2", "float32"),
                                       ("StatelessRandomUniformFullIntV2", "uint64")])
def test_working_memory_stays_within_the_declared_workspace(op, dtype):
    """A draw of 8 chunks holds one chunk's words at a time: its peak beyond the output stays within WORKSPACE,
    which does not grow with the size."""
    n = 8 * 4 * philox.CHUNK_BLOCKS
    node = _Node(op, dtype, n)
    key, counter = _key_counter(1)
    tracemalloc.start()
    try:
        (y,) = EXECUTORS[op](node, [None, key, counter, np.int32(1)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert y.shape == (n,)
    assert peak - y.nbytes <= WORKSPACE[op](node) == WORKSPACE[op](_Node(op, dtype, 4 * n))


def test_a_fixed_seed_folds_its_key_and_counter_and_survives_saving(tmp_path):
    """A Const seed: the key and counter fold into uint64 Consts (values above 2^63 included), a draw larger than a
    fold stays a node; saved as .air and .pbtxt and loaded back, each draws TF's numbers."""
    def fn(x):
        return x + tf.random.stateless_uniform((70, 70), seed=tf.constant([7, 1], tf.int32))

    step = tf.function(fn)
    graph = graph_ir.from_tensorflow(step, tf.TensorSpec((70, 70), tf.float32))
    consts = [n for n in graph.nodes.values() if n.type == "Const" and n.output_descs[0].dtype.name == "uint64"]
    assert len(consts) == 2 and any(n.attrs["value"].max() >= 2**63 for n in consts)
    assert any(n.type == "StatelessRandomUniformV2" for n in graph.nodes.values())
    x = np.zeros((70, 70), np.float32)
    for ext in ("air", "pbtxt"):
        path = str(tmp_path / f"draw.{ext}")
        graph.save(path)
        session = graph_ir.Session()
        session.add_graph(0, graph_ir.load(path))
        assert_bitwise(session.run_graph(0, [x])[0], step(x).numpy())
