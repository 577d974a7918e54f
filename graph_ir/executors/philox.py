"""TensorFlow's Philox-4x32-10 counter-based generator (tensorflow/core/lib/random/philox_random.h, now
xla/tsl/lib/random/philox_random.h), vectorized over counters in NumPy: block b of a stream is one Philox call on the
128-bit counter `counter + b` (TF's Skip(b) then operator()), giving 4 uint32 words.

One call: 10 rounds on words (c0, c1, c2, c3) with key (k0, k1):
    p0 = 0xD2511F53 * c0,  p1 = 0xCD9E8D57 * c2   (64-bit products)
    (c0, c1, c2, c3) <- (hi(p1) ^ c1 ^ k0, lo(p1), hi(p0) ^ c3 ^ k1, lo(p0))
with the key bumped by (0x9E3779B9, 0xBB67AE85) mod 2^32 between rounds.

The key and counter of the V2 stateless ops come from a seed as TF's GenerateKey makes them
(tensorflow/core/kernels/stateless_random_ops.cc): one Philox call on the seed's words with a fixed key, written to
memory as random_ops_util.h lays them out (key u64[1] = k0 | k1 << 32; counter u64[2], word 0 least significant).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
_KEY_BUMPS = (0x9E3779B9, 0xBB67AE85)
_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)
_ROUNDS = 10
# GenerateKey's fixed key (stateless_random_ops.cc).
_SEED_KEY = (0x3EC8F720, 0x02461E29)
# Blocks per pass: each pass holds a few arrays of this many uint64s, so memory stays bounded whatever the size.
CHUNK_BLOCKS = 1 << 15


def philox(key: tuple[int, int], words: tuple[np.ndarray, ...]) -> np.ndarray:
    """Philox-4x32-10 of each counter (c0, c1, c2, c3) (uint64 arrays holding 32-bit values) under `key`
    (k0, k1); returns uint32 [n, 4]."""
    c0, c1, c2, c3 = (np.asarray(w, dtype=np.uint64) for w in words)
    k0, k1 = key
    for round_index in range(_ROUNDS):
        if round_index:
            k0, k1 = (k0 + _KEY_BUMPS[0]) & 0xFFFFFFFF, (k1 + _KEY_BUMPS[1]) & 0xFFFFFFFF
        p0 = c0 * np.uint64(_MULTIPLIERS[0])  # < 2^64: exact in uint64
        p1 = c2 * np.uint64(_MULTIPLIERS[1])
        c0, c1, c2, c3 = ((p1 >> _SHIFT) ^ c1 ^ np.uint64(k0), p1 & _LOW32,
                          (p0 >> _SHIFT) ^ c3 ^ np.uint64(k1), p0 & _LOW32)
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def key_counter_from_seed(seed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """StatelessRandomGetKeyCounter: the seed's two values as uint64 (int32 sign-extended, as C++'s cast does),
    split into the four counter words, through one Philox call under the fixed key; the key is its words 0 and 1,
    the counter (0, 0, words 2, 3). Returns key u64[1], counter u64[2]."""
    s0, s1 = (int(v) & 0xFFFFFFFFFFFFFFFF for v in np.asarray(seed).reshape(-1)[:2])
    words = tuple(np.array([w], np.uint64) for w in (s0 & 0xFFFFFFFF, s0 >> 32, s1 & 0xFFFFFFFF, s1 >> 32))
    mixed = [int(w) for w in philox(_SEED_KEY, words)[0]]
    key = np.array([mixed[0] | mixed[1] << 32], np.uint64)
    counter = np.array([0, mixed[2] | mixed[3] << 32], np.uint64)
    return key, counter


def blocks(key: np.ndarray, counter: np.ndarray, first: np.ndarray) -> np.ndarray:
    """The Philox outputs (uint32 [n, 4]) at 128-bit counters `counter + first` (`first`: uint64 block offsets),
    for TF's key and counter tensors (key u64[1], counter u64[2])."""
    k = int(np.asarray(key, np.uint64).reshape(-1)[0])
    lo, hi = (np.uint64(int(c)) for c in np.asarray(counter, np.uint64).reshape(-1)[:2])
    with np.errstate(over="ignore"):
        low = lo + first  # wraps mod 2^64; the carry goes into the high half, as TF's Skip carries
        high = hi + (low < first).astype(np.uint64)
    return philox((k & 0xFFFFFFFF, k >> 32), (low & _LOW32, low >> _SHIFT, high & _LOW32, high >> _SHIFT))


def chunks(count: int) -> Iterator[tuple[int, int]]:
    """[start, stop) ranges covering range(count), CHUNK_BLOCKS at a time."""
    size = CHUNK_BLOCKS
    for start in range(0, count, size):
        yield start, min(start + size, count)
