"""The random family's executors (prototypes: graph_ir/opset/random.py): TensorFlow's V2 stateless random ops on
its Philox stream (graph_ir/executors/philox.py), filled as TF's CPU kernels fill them (random_op_cpu.h,
FillPhiloxRandomTask): the output, flattened row-major, is cut into groups of the distribution's
kResultElementCount; group g is drawn from the Philox call at counter + g (a last, partial group keeps its first
elements). Sharding over threads does not change the values, so neither does drawing in chunks here.

Distributions (xla/tsl/lib/random/random_distributions.h and random_distributions_utils.h):
- uniform float32: bits(0x3F800000 | (x & 0x7FFFFF)) - 1 (Uint32ToFloat), 4 per call; float16 and bfloat16 the
  same with the low 10 (7) mantissa bits of each word, 4 per call; float64 from 20 + 32 bits of two words, 2 per call.
- integers: minval + x % (maxval - minval) in wrapping unsigned arithmetic (UniformDistribution<int>); full-range:
  the words (64-bit values: lo | hi << 32, 2 per call).
- normal (BoxMullerFloat): u1 = max(uniform(x0), 1e-7), v = float(2*pi * uniform(x1)) (a double product),
  r = sqrt(-2 log u1); (r sin v, r cos v); 16-bit floats round that float result; float64 from two 52-bit uniforms.
- truncated normal: group g (4 outputs; 2 for float64) reads single words from the call at counter + 256 g (128 g),
  Box-Muller on consecutive pairs, keeping values with |y| < 2 in order (SingleSampleAdapter, 256 reserved words per
  output).

Bitwise TF's, except where TF calls libm: log, sin and cos (glibc's logf and sincosf are not correctly rounded, and
its float64 ones differ from NumPy's in the last bit now and then): here they are NumPy's float64 results rounded,
so a normal can differ from TF's by an ulp or two of its log, sin or cos.

The stateful ops (RandomUniform, RandomStandardNormal, TruncatedNormal, RandomUniformInt; TF's PhiloxRandomOp and
RandomUniformIntOp in random_op.cc) draw the same distributions from a generator of their own: GuardedPhiloxRandom's
Init(seed, seed2) makes Philox with key = seed and 128-bit counter (0, seed2) (as uint64s); each run takes the
generator as it is and skips it ahead by 256 calls per output (ReserveRandomOutputs(n, 256)), so run k draws at
counter (0, seed2) + 256 n k. As TF keeps the generator in the op's kernel, the counter lives in the Session, one
stream per stateful node of each added graph (streams(): a graph added anew starts at the seeds; the plans of one
template at several input shapes share it); an executor run outside a Session draws at the seeds. seed = seed2 = 0
(TF's nondeterministic seed) is refused when lowering."""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator

import ml_dtypes
import numpy as np

from graph_ir.executors import philox
from graph_ir.executors.common import Executor
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Node
from graph_ir.opset.random import PHILOX, check_alg

_TWO_PI = 2 * math.pi  # C's 2 * M_PI: a double
_TRUNCATE = 2.0
_RESERVED_WORDS = 256  # SingleSampleAdapter's words reserved per output (random_op_cpu.h)


def _uniform32(x: np.ndarray) -> np.ndarray:
    return ((x & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)


def _uniform64(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    mantissa = (hi.astype(np.uint64) & np.uint64(0xFFFFF)) << np.uint64(32) | lo.astype(np.uint64)
    return (mantissa | np.uint64(1023 << 52)).view(np.float64) - 1.0


def _uniform(dtype: np.dtype, x: np.ndarray) -> np.ndarray:
    """uint32 [m, 4] -> m groups of uniforms in [0, 1)."""
    if dtype == np.float32:
        return _uniform32(x)
    if dtype == np.float16:
        return ((x & np.uint32(0x3FF)) | np.uint32(15 << 10)).astype(np.uint16).view(np.float16) - np.float16(1)
    if dtype == ml_dtypes.bfloat16:  # 1 + k/128 - 1 is exact in bfloat16
        one_plus = ((x & np.uint32(0x7F)) | np.uint32(127 << 7)).astype(np.uint16).view(ml_dtypes.bfloat16)
        return (one_plus.astype(np.float32) - np.float32(1)).astype(ml_dtypes.bfloat16)
    return _uniform64(x[:, 0::2], x[:, 1::2])


def _box_muller32(x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    u1 = np.maximum(_uniform32(x0), np.float32(1e-7))
    v = (_TWO_PI * _uniform32(x1).astype(np.float64)).astype(np.float32)
    r = np.sqrt(np.float32(-2) * np.log(u1.astype(np.float64)).astype(np.float32))
    v = v.astype(np.float64)
    return np.sin(v).astype(np.float32) * r, np.cos(v).astype(np.float32) * r


def _box_muller64(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    u1 = np.maximum(_uniform64(x[..., 0], x[..., 1]), 1e-7)
    v = _TWO_PI * _uniform64(x[..., 2], x[..., 3])
    r = np.sqrt(-2.0 * np.log(u1))
    return np.sin(v) * r, np.cos(v) * r


def _normal(dtype: np.dtype, x: np.ndarray) -> np.ndarray:
    """uint32 [m, 4] -> m groups of normals (pairs interleaved as TF stores them)."""
    if dtype == np.float64:
        return np.stack(_box_muller64(x), axis=-1)
    f0, f1 = _box_muller32(x[:, 0::2], x[:, 1::2])
    return np.stack([f0, f1], axis=-1).reshape(len(x), 4).astype(dtype)


def _int_in_range(dtype: np.dtype, x: np.ndarray, lo, hi) -> np.ndarray:
    unsigned = np.dtype(dtype.str.replace("i", "u"))
    bits = _full_int(unsigned, x)
    span = np.asarray(hi).astype(unsigned) - np.asarray(lo).astype(unsigned)  # wraps: hi > lo
    return (np.asarray(lo).astype(unsigned) + bits % span).view(dtype)


def _full_int(dtype: np.dtype, x: np.ndarray) -> np.ndarray:
    if dtype.itemsize == 4:
        return x.view(dtype)
    return (x[:, 0::2].astype(np.uint64) | x[:, 1::2].astype(np.uint64) << np.uint64(32)).view(dtype)


def _stream(node: Node, args: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, int, np.dtype]:
    """The key, counter and element count of a V2 draw, its alg checked, and the output dtype."""
    check_alg(node.type, node.name, np.asarray(args[3]).reshape(-1)[0])
    desc = node.output_descs[0]
    return args[1], args[2], desc.num_elements, np.dtype(desc.dtype.numpy)


def _fixed(group: Callable[[np.dtype], int], transform: Callable) -> Executor:
    """A draw with a fixed number of words per output: group g of `group(dtype)` outputs from the call at
    counter + g; transform(node, dtype, words, args) makes a chunk's outputs."""

    def run(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        key, counter, n, dtype = _stream(node, args)
        size = group(dtype)
        out = np.empty(n, dtype)
        with np.errstate(all="ignore"):
            for start, stop in philox.chunks(-(-n // size)):
                x = philox.blocks(key, counter, np.arange(start, stop, dtype=np.uint64))
                values = transform(node, dtype, x, args).reshape(-1)
                out[start * size:min(stop * size, n)] = values[:min(stop * size, n) - start * size]
        return [out.reshape(node.output_descs[0].shape)]

    return run


def _truncated(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """Each group's own Philox region (counter + reserved * g onward), Box-Muller on consecutive word pairs, the
    first `group` values with |y| < 2 kept in draw order; calls are drawn for the groups still short, all at once."""
    key, counter, n, dtype = _stream(node, args)
    group = 2 if dtype == np.float64 else 4
    reserved = group * _RESERVED_WORDS // 4  # Philox calls per group
    out = np.empty(n, dtype)
    for start, stop in philox.chunks(-(-n // group)):
        groups = np.arange(start, stop, dtype=np.uint64)
        values = np.zeros((len(groups), group), dtype)
        filled = np.zeros(len(groups), np.int64)
        short = np.arange(len(groups))
        call = 0
        while short.size:
            x = philox.blocks(key, counter, groups[short] * np.uint64(reserved) + np.uint64(call))
            with np.errstate(all="ignore"):
                if dtype == np.float64:
                    candidates = np.stack(_box_muller64(x), axis=-1)
                else:
                    candidates = np.stack(_box_muller32(x[:, 0::2], x[:, 1::2]), axis=-1).reshape(len(x), 4)
            kept = np.abs(candidates) < _TRUNCATE
            slot = filled[short, None] + np.cumsum(kept, axis=1) - 1
            take = kept & (slot < group)
            rows = np.broadcast_to(short[:, None], take.shape)[take]
            values[rows, slot[take]] = candidates[take].astype(dtype)
            filled[short] = np.minimum(filled[short] + kept.sum(axis=1), group)
            short = short[filled[short] < group]
            call += 1
        stop_element = min(stop * group, n)
        out[start * group:stop_element] = values.reshape(-1)[:stop_element - start * group]
    return [out.reshape(node.output_descs[0].shape)]


def _key_counter(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    return list(philox.key_counter_from_seed(args[0]))


def _checked_range(node: Node, args: list[np.ndarray]):
    lo, hi = (np.asarray(a).reshape(()) for a in args[4:6])
    if not lo < hi:
        raise GraphError(f"{node.type} {node.name!r}: inputs 'minval' and 'maxval' must have minval < maxval "
                         f"(TF's check), got {lo} and {hi}")
    return lo, hi


def _uniform_int(node, dtype, x, args):
    return _int_in_range(dtype, x, *_checked_range(node, args))


# The running Session's streams of one graph: {(node name, seed, seed2): the next 128-bit Philox counter}.
_STREAMS: contextvars.ContextVar[dict | None] = contextvars.ContextVar("graph_ir_random_streams", default=None)
_U64, _U128 = (1 << 64) - 1, (1 << 128) - 1


@contextlib.contextmanager
def streams(state: dict) -> Iterator[None]:
    """Stateful random nodes draw from, and advance, `state` during the run (a Session keeps one per graph)."""
    token = _STREAMS.set(state)
    try:
        yield
    finally:
        _STREAMS.reset(token)


@contextlib.contextmanager
def unchanged() -> Iterator[None]:
    """Draws inside leave the running streams as they were: a node run again (graph_ir.compare's isolated run) draws
    what its run in the graph draws."""
    state = _STREAMS.get()
    with streams(dict(state) if state is not None else {}):
        yield


def _reserve(node: Node, n: int) -> tuple[np.ndarray, np.ndarray]:
    """GuardedPhiloxRandom::ReserveRandomOutputs(n, 256): the node's key and counter now (u64[1], u64[2]); its
    stream then skips 256 n calls. An empty draw reserves nothing."""
    seed, seed2 = (int(node.attrs[a]) & _U64 for a in ("seed", "seed2"))
    state, key = _STREAMS.get(), (node.name, seed, seed2)
    counter = seed2 << 64 if state is None else state.get(key, seed2 << 64)
    if state is not None:
        state[key] = (counter + n * _RESERVED_WORDS) & _U128
    return np.array([seed], np.uint64), np.array([counter & _U64, counter >> 64], np.uint64)


def _stateful(draw: Executor, ranged: bool = False) -> Executor:
    """A stateful op through the V2 stateless executor `draw` at the node's reserved key and counter (Philox)."""

    def run(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        n = node.output_descs[0].num_elements
        bounds = list(args[1:3]) if ranged else []
        if ranged and n:  # TF checks minval < maxval only for a non-empty output
            _checked_range(node, [None] * 4 + bounds)
        key, counter = _reserve(node, n)
        return draw(node, [args[0], key, counter, np.int32(PHILOX), *bounds])

    return run


EXECUTORS: dict[str, Executor] = {
    "StatelessRandomGetKeyCounter": _key_counter,
    "StatelessRandomGetKeyCounterAlg": lambda node, args: [*_key_counter(node, args), np.array(PHILOX, np.int32)],
    "StatelessRandomGetAlg": lambda node, args: [np.array(PHILOX, np.int32)],
    "StatelessRandomUniformV2": _fixed(lambda d: 2 if d == np.float64 else 4,
                                       lambda node, dtype, x, args: _uniform(dtype, x)),
    "StatelessRandomNormalV2": _fixed(lambda d: 2 if d == np.float64 else 4,
                                      lambda node, dtype, x, args: _normal(dtype, x)),
    "StatelessTruncatedNormalV2": _truncated,
    "StatelessRandomUniformIntV2": _fixed(lambda d: 4 // (d.itemsize // 4), _uniform_int),
    "StatelessRandomUniformFullIntV2": _fixed(lambda d: 4 // (d.itemsize // 4),
                                              lambda node, dtype, x, args: _full_int(dtype, x)),
}
# Each run draws anew from the node's stream: never folded into a constant (graph_ir/executors/folding.py).
STATEFUL = frozenset({"RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt"})
EXECUTORS.update({
    "RandomUniform": _stateful(EXECUTORS["StatelessRandomUniformV2"]),
    "RandomStandardNormal": _stateful(EXECUTORS["StatelessRandomNormalV2"]),
    "TruncatedNormal": _stateful(_truncated),
    "RandomUniformInt": _stateful(EXECUTORS["StatelessRandomUniformIntV2"], ranged=True),
})

# Working memory while drawing: at most CHUNK_BLOCKS Philox calls' words and their intermediates at a time (measured
# under 210 bytes per call, tests/graph_ir/test_random_ops.py), whatever the output size.
WORKSPACE_PER_CALL = 256


def _workspace(node: Node) -> int:
    return min(node.output_descs[0].num_elements, philox.CHUNK_BLOCKS) * WORKSPACE_PER_CALL


WORKSPACE = {op: _workspace for op in EXECUTORS if not op.startswith("StatelessRandomGet")}
