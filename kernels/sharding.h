// The one sharding plan of the kernels, used by the TF ops (TensorFlow's intra-op pool) and by the pybind11
// binding (its own threads): how an update of n elements, each moving bytes_per_element bytes, is cut into blocks.
// Small updates run inline (dispatching costs a few microseconds, more than the work); large ones are cut into a
// few blocks per thread, which the pool threads take from a shared counter, so that a thread that starts late takes
// fewer. The caller of a TF op only waits: running a block on it too is faster when the op runs alone, but much
// slower right after another op whose pool threads still spin, as in a training step (bench/NOTES.md). Each block
// is a multiple of 64 elements so that block edges fall on cache lines and on the vector width of every storage
// type, and each at least half the inline size so that no block is all overhead. (Blocks of 1/16 and 1/64 of a
// thread's share were no faster at 16M elements, and 1/256 slower.)
#pragma once

#include <algorithm>
#include <cstdint>

namespace optim_kernels {

constexpr int64_t kInlineBytes = 256 * 1024;
constexpr int64_t kBlockAlign = 64;
constexpr int64_t kBlocksPerThread = 4;

// The block size for `threads` workers, or 0 when the update should run inline in the calling thread.
inline int64_t shard_block(int64_t n, int64_t bytes_per_element, int64_t threads) {
  if (n <= 0 || threads <= 1 || n * bytes_per_element <= kInlineBytes) return 0;
  const int64_t min_block = std::max<int64_t>(kBlockAlign, kInlineBytes / (2 * bytes_per_element));
  int64_t block = (n + threads * kBlocksPerThread - 1) / (threads * kBlocksPerThread);
  block = (block + kBlockAlign - 1) / kBlockAlign * kBlockAlign;
  return std::max(min_block, block);
}

}  // namespace optim_kernels
