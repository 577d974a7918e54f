"""The Session's fast paths keep its results: Erf/Erfc in the binding's C++ (bitwise math.erf / math.erfc rounded
once, on any thread count), the optimizer executors' lean calls into the binding (bitwise the public graph_ir.kernels
calls, with the same refusals), the binding's persistent worker pool (concurrent callers, a forked child), the
two-pass Relu and Relu6, and Session(threads=...), which every executor of a run, subgraphs included, sees."""

from __future__ import annotations

import math
import subprocess
import sys
import threading

import ml_dtypes
import numpy as np
import pytest

import graph_ir
from graph_ir import _binding, kernels, ops
from graph_ir.executors import EXECUTORS, denormals
from graph_ir.executors import threads as executor_threads
from graph_ir.executors.activation import _relu6, _relu6_grad
from graph_ir.executors.math import _relu
from graph_ir.ir.dtypes import as_dtype
from graph_ir.ir.nodes import TensorDesc
from tests.helpers import ROOT
from tests.helpers.control_graphs import functional, subgraph


def _session_run(build, *inputs: np.ndarray, **session_args) -> list[np.ndarray]:
    graph = graph_ir.Graph("lean")
    with graph:
        data = [graph_ir.Data(k, x.dtype, x.shape, name=f"in{k}") for k, x in enumerate(inputs)]
        out = build(*data)
        graph.set_outputs(list(out) if isinstance(out, tuple) else [out])
    session = graph_ir.Session(**session_args)
    session.add_graph(0, graph)
    return session.run_graph(0, list(inputs))


def _erf_grid(dtype) -> np.ndarray:
    """[-12, 12] finely (40001 points, more than one thread's share), signed zeros, tiny and subnormal values, NaN
    and +-inf."""
    x = np.concatenate([np.linspace(-12, 12, 40001), [0, -0.0, 1e-30, -1e-8, 1e-45, 26, 27, np.nan, np.inf, -np.inf]])
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("name", ["Erf", "Erfc"])
@pytest.mark.parametrize("threads", [1, 2])
def test_erf_is_math_erf_rounded_once_on_any_thread_count(name, dtype, threads):
    """float32: std::erf in double rounded to float32 (a subnormal float32 flushed to zero, as in TF's run:
    graph_ir/executors/denormals.py); float16: widened, then the double rounded once to float16. Both bitwise math's
    (the same libm), NaN in place, whatever the thread count."""
    x = _erf_grid(dtype)
    (got,) = _session_run(getattr(ops, name), x, threads=threads)
    exact = np.array([getattr(math, name.lower())(float(v)) for v in x.astype(np.float64)])
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(exact))
    want = exact.astype(dtype)
    if dtype == np.float32 and denormals.supported():
        want = np.where(np.abs(want) < np.finfo(dtype).tiny, np.copysign(dtype(0), want), want)
    bits = np.dtype(f"u{x.dtype.itemsize}")
    same = got.view(bits) == want.view(bits)
    assert np.all(same | np.isnan(exact)), (x[~same][:5], got[~same][:5], want[~same][:5])


def test_erf_of_a_strided_view_is_computed_on_a_contiguous_copy():
    x = _erf_grid(np.float32)[:40000].reshape(200, 200)
    (node,) = [n for n in _graph_of(ops.Erf, x.T).nodes.values() if n.type == "Erf"]
    (got,) = EXECUTORS["Erf"](node, [x.T])
    np.testing.assert_array_equal(got, np.vectorize(math.erf)(x.T.astype(np.float64)).astype(np.float32))


def _graph_of(build, *inputs: np.ndarray) -> graph_ir.Graph:
    graph = graph_ir.Graph("lean")
    with graph:
        graph.set_outputs([build(*[graph_ir.Data(k, x.dtype, x.shape) for k, x in enumerate(inputs)])])
    return graph


def test_the_erf_binding_refuses_what_it_cannot_read():
    x = np.ones(8, np.float32)
    with pytest.raises(ValueError, match="x must be C-contiguous"):
        _binding.erf_float32(np.ones(16, np.float32)[::2], np.empty(8, np.float32), False, 1)
    with pytest.raises(TypeError, match="x has buffer format 'd'"):
        _binding.erf_float32(np.ones(8), np.empty(8), False, 1)
    with pytest.raises(ValueError, match="out and x share memory"):
        _binding.erf_float32(x, x, False, 1)
    with pytest.raises(ValueError, match="x has 8 elements but out has 7"):
        _binding.erf_float32(x, np.empty(7, np.float32), False, 1)
    with pytest.raises(ValueError, match="out is updated in place but is not a writable buffer"):
        _binding.erf_float32(x, b"\0" * 32, False, 1)


def _adam_state(rng, n=1000, dtype=np.float32):
    return [rng.standard_normal(n).astype(dtype) for _ in range(4)] + [np.abs(rng.standard_normal(n)).astype(dtype)]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_the_lean_fused_ema_adam_is_the_public_call_bitwise(dtype):
    attrs = {"lr": 0.01, "ema_decay": 0.9, "beta1": 0.8, "beta2": 0.95, "eps": 1e-6, "mode": 1,
             "bias_correction": True, "weight_decay": 0.01}
    grad, *state = _adam_state(np.random.default_rng(1), dtype=dtype)
    public = [a.copy() for a in state]
    kernels.apply_fused_ema_adam(grad, *public, np.int64(3), **attrs)
    lean = [a.copy() for a in state]
    key = tuple((k, type(v), v) for k, v in attrs.items())
    kernels.prepared_fused_ema_adam(key)(grad, *lean, np.array(3, np.int64))
    for p, q in zip(public, lean, strict=True):
        np.testing.assert_array_equal(p.view(np.uint8), q.view(np.uint8))


def test_the_lean_fused_ema_adam_refuses_what_the_public_call_refuses():
    grad, var, m, v, s = _adam_state(np.random.default_rng(2), n=8)
    ok = (("lr", float, 0.01),)
    with pytest.raises(ValueError, match="apply_fused_ema_adam: step must be"):
        kernels.prepared_fused_ema_adam(ok)(grad, var, m, v, s, np.array(0, np.int64))
    with pytest.raises(TypeError, match="has dtype float16 but grad has float32"):
        kernels.prepared_fused_ema_adam(ok)(grad, var, m, v.astype(np.float16), s, 1)
    with pytest.raises(ValueError, match="var and m share memory"):
        kernels.prepared_fused_ema_adam(ok)(grad, var, var, v, s, 1)
    with pytest.raises(ValueError, match="C-contiguous"):
        kernels.prepared_fused_ema_adam(ok)(grad, var, m, np.ones(16, np.float32)[::2], s, 1)
    with pytest.raises(ValueError, match="apply_fused_ema_adam: lr must be finite"):
        kernels.prepared_fused_ema_adam((("lr", float, float("inf")),))
    # The cache keys on the attribute's type: an int where a bool is declared is refused even after True was seen.
    kernels.prepared_fused_ema_adam((("bias_correction", bool, True),))
    with pytest.raises(TypeError, match="bias_correction must be a bool"):
        kernels.prepared_fused_ema_adam((("bias_correction", int, 1),))
    with pytest.raises(TypeError, match="unexpected attribute"):
        kernels.prepared_fused_ema_adam((("learning_rate", float, 0.1),))


def test_the_lean_fused_ema_adam_refuses_two_mappings_of_one_file(tmp_path):
    path = tmp_path / "state.bin"
    np.zeros(16, np.float32).tofile(path)
    var, m = np.memmap(path, np.float32, "r+", shape=(16,)), np.memmap(path, np.float32, "r+", shape=(16,))
    grad, v, s = (np.ones(16, np.float32) for _ in range(3))
    with pytest.raises(ValueError, match="var and m map the same bytes of one file"):
        kernels.prepared_fused_ema_adam(())(grad, var, m, v, s, 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_the_lean_power_sign_is_the_public_call_bitwise(dtype):
    rng = np.random.default_rng(3)
    var, m, grad = (rng.standard_normal(1000).astype(dtype) for _ in range(3))
    scalars = [np.asarray(v, dtype) for v in (0.1, 0.5, 0.9, 0.8)]
    public, lean = (var.copy(), m.copy()), (var.copy(), m.copy())
    kernels.inplace_apply_power_sign(*public, *scalars, grad)
    kernels.lean_power_sign(*lean, grad, *[a.reshape(1) for a in scalars])
    for p, q in zip(public, lean, strict=True):
        np.testing.assert_array_equal(p.view(np.uint8), q.view(np.uint8))
    with pytest.raises(ValueError, match="lr must be a scalar"):
        kernels.lean_power_sign(*lean, grad, np.zeros(2, dtype), *scalars[1:])
    with pytest.raises(TypeError, match="lr has dtype"):
        kernels.lean_power_sign(*lean, grad, np.zeros((), np.int32), *scalars[1:])


def test_the_worker_pool_serves_concurrent_callers_alike():
    """Large updates (parallel in the binding) from four Python threads at once: each the serial result bitwise
    (a caller finding the pool busy runs its blocks alone)."""
    rng = np.random.default_rng(4)
    n = 300_000
    grad = rng.standard_normal(n).astype(np.float32)
    start = [rng.standard_normal(n).astype(np.float32) for _ in range(4)]
    scalars = [np.float32(v) for v in (0.1, 0.5, 0.9, 0.8)]
    want = [a.copy() for a in start[:2]]
    for _ in range(3):
        kernels.inplace_apply_power_sign(*want, *scalars, grad)
    states = [[a.copy() for a in start[:2]] for _ in range(4)]

    def work(state):
        for _ in range(3):
            kernels.inplace_apply_power_sign(*state, *scalars, grad)

    workers = [threading.Thread(target=work, args=(state,)) for state in states]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    for state in states:
        for got, w in zip(state, want, strict=True):
            np.testing.assert_array_equal(got, w)


def test_a_forked_child_gets_a_pool_of_its_own():
    """The pool's workers do not survive fork: the child makes its own, and its large updates finish."""
    code = """
import os, numpy as np
from graph_ir import kernels
def update():
    var, m, grad = (np.ones(300_000, np.float32) for _ in range(3))
    kernels.inplace_apply_power_sign(var, m, 0.1, 0.5, 0.9, 0.8, grad)
    return float(var[0])
first = update()
pid = os.fork()
if pid == 0:
    os._exit(0 if update() == first else 3)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
"""
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)


class _Node:
    """What an elementwise executor reads of its node: the output dtype."""

    def __init__(self, dtype) -> None:
        self.output_descs = [TensorDesc("y", as_dtype(dtype), ())]


_NODE = {d: _Node(d) for d in (np.float32, np.float64, np.float16)}


def _signed_bits(a: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(a), np.nan, a).view(f"u{a.dtype.itemsize}")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the references' inf * 0
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_relu_and_relu6_match_their_selection_formulas_bitwise(dtype):
    """On signed zeros, NaN of both signs, +-inf, 0 and 6 exactly, strided views and 0-d arrays: Relu is
    where(x > 0 or NaN, x, +0.0) (so -0.0 gives +0.0); Relu6 is where(x < 0, 0, min(x, 6)) keeping -0.0, but for
    float32 and float64 arrays +0.0 in the elements TF's AVX packets cover (all but size % packet); ReluGrad and
    Relu6Grad are the products dy * mask (NaN where dy is NaN or inf and the mask 0, -0.0 for negative dy)."""
    x = np.array([-0.0, 0.0, -1.5, 2.5, 6.0, 7.0, np.nan, -np.nan, np.inf, -np.inf, 5.99, -1e-30] * 3, dtype)
    for v in (x, x.reshape(6, 6).T, x[:1].reshape(()), np.full((6, 6), -0.0, dtype).T):
        relu = np.where(~(v <= 0), v, np.zeros((), dtype))
        y = np.where(v < 0, np.zeros((), dtype), v)
        relu6 = np.ascontiguousarray(np.where(y > 6, np.asarray(6, dtype), y))
        if v.ndim and dtype != np.float16:
            head = relu6.reshape(-1)[:v.size - v.size % (32 // v.itemsize)]
            head[head == 0] = 0
        np.testing.assert_array_equal(_signed_bits(np.asarray(_relu(v))), _signed_bits(relu))
        np.testing.assert_array_equal(_signed_bits(np.asarray(_relu6(v))), _signed_bits(relu6))
        dy = np.array([-1.0, np.nan, np.inf, -np.inf, 2.0, -0.0] * 6, dtype)[:v.size].reshape(v.shape)
        np.testing.assert_array_equal(_signed_bits(np.asarray(EXECUTORS["ReluGrad"](_NODE[dtype], [dy, v])[0])),
                                      _signed_bits(dy * (v > 0).astype(dtype)))
        np.testing.assert_array_equal(_signed_bits(np.asarray(_relu6_grad(dy, v))),
                                      _signed_bits(dy * ((v > 0) & (v < 6)).astype(dtype)))


def _negations_around_an_if() -> graph_ir.Graph:
    """root(c, x) = If(c, -x) with then(a) = -a and else(a) = -a: a Neg in the root graph and one in the branch run."""
    params = [("float32", (3,))]
    then, other = (subgraph(name, params, lambda a: [ops.Neg(a)]) for name in ("then", "else"))
    root = graph_ir.Graph("threads_root")
    with root:
        c, x = graph_ir.Data(0, "bool", ()), graph_ir.Data(1, "float32", (3,))
        root.set_outputs([functional(root, "If", [c, ops.Neg(x)], [then, other], name="choose").output(0)])
    return root


def test_session_threads_is_checked_and_seen_by_every_executor_of_a_run(monkeypatch):
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(TypeError, match="threads must be an int >= 1 or None"):
            graph_ir.Session(threads=bad)
    assert graph_ir.Session().threads is None and graph_ir.Session(threads=2).threads == 2
    seen = []
    neg = EXECUTORS["Neg"]
    monkeypatch.setitem(EXECUTORS, "Neg", lambda node, args: seen.append(executor_threads.count()) or neg(node, args))
    for threads, want in ((1, 1), (3, 3), (None, executor_threads.available())):
        seen.clear()
        session = graph_ir.Session(threads=threads)
        session.add_graph(0, _negations_around_an_if())
        (got,) = session.run_graph(0, [np.bool_(True), np.arange(3, dtype=np.float32)])
        np.testing.assert_array_equal(got, np.arange(3, dtype=np.float32))
        assert seen == [want] * 2, (threads, seen)
    assert executor_threads.count() == 1  # restored after the run
