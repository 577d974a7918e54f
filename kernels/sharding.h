// The one sharding plan of the kernels, used by the TF ops (TensorFlow's intra-op pool) and by the pybind11
// binding (its own threads): how an update of n elements, each moving bytes_per_element bytes, is cut into blocks.
// Small updates run inline (dispatching costs a few microseconds, more than the work). Large ones are handed out
// from a shared counter, one task per thread, in guided blocks: each claim takes a share of what is left, so the
// first blocks are large (few restarts of the prefetch streams) and the last ones small, and a thread that starts
// late takes fewer instead of leaving the others waiting at the end. (With 8 equal blocks at 16M elements, one
// thread worked alone for 55-300 us at the end of each op: bench/NOTES.md.) The caller of a TF op only waits:
// running blocks on it too is faster when the op runs alone, but much slower right after another op whose pool
// threads still spin, as in a training step. Block edges are multiples of 64 elements, so that they fall on cache
// lines and on the vector width of every storage type, and blocks hold at least half the inline size so that no
// block is all overhead.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace optim_kernels {

constexpr int64_t kInlineBytes = 256 * 1024;
constexpr int64_t kBlockAlign = 64;
constexpr int64_t kGuidedShare = 2;  // each claim takes 1 / (kGuidedShare * threads) of what is left

// The smallest block for `threads` workers, or 0 when the update should run inline in the calling thread.
inline int64_t shard_min_block(int64_t n, int64_t bytes_per_element, int64_t threads) {
  if (n <= 0 || threads <= 1 || n * bytes_per_element <= kInlineBytes) return 0;
  return std::max<int64_t>(kBlockAlign, kInlineBytes / (2 * bytes_per_element) / kBlockAlign * kBlockAlign);
}

// How many tasks to start: no more than there are threads or minimum blocks.
inline int64_t shard_tasks(int64_t n, int64_t threads, int64_t min_block) {
  return std::max<int64_t>(1, std::min<int64_t>(threads, (n + min_block - 1) / min_block));
}

// Claims the next block of [0, n) from `next` into [*begin, *end); false when nothing is left. Safe to call from
// several threads at once.
inline bool claim_block(std::atomic<int64_t>& next, int64_t n, int64_t threads, int64_t min_block, int64_t* begin,
                        int64_t* end) {
  int64_t at = next.load(std::memory_order_relaxed);
  for (;;) {
    if (at >= n) return false;
    int64_t block = (n - at) / (kGuidedShare * threads);
    block = std::max(min_block, (block + kBlockAlign - 1) / kBlockAlign * kBlockAlign);
    const int64_t stop = std::min(n, at + block);
    if (next.compare_exchange_weak(at, stop, std::memory_order_relaxed)) {
      *begin = at;
      *end = stop;
      return true;
    }
  }
}

// One worker's share: fn(begin, end) on every block it claims from `next`, until none is left.
template <typename Fn>
inline void run_claimed_blocks(std::atomic<int64_t>& next, int64_t n, int64_t tasks, int64_t min_block, Fn&& fn) {
  int64_t begin = 0, end = 0;
  while (claim_block(next, n, tasks, min_block, &begin, &end)) fn(begin, end);
}

}  // namespace optim_kernels
