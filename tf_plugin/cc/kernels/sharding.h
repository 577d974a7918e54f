// Splits an element range over TensorFlow's intra-op thread pool. Small updates run inline (dispatch costs more
// than the work); large ones are cut into a few blocks per thread, each a multiple of 64 elements so that block
// edges fall on cache lines and vector widths of every storage type.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/platform/threadpool.h"

namespace tf_plugin {

// Below this many bytes of memory traffic per call the pool's dispatch (a few microseconds) outweighs the work.
constexpr int64_t kInlineBytes = 256 * 1024;
constexpr int64_t kBlockAlign = 64;
constexpr int64_t kBlocksPerThread = 4;

template <typename Fn>  // Fn(int64_t begin, int64_t end)
void ParallelForRange(tensorflow::OpKernelContext* ctx, int64_t n, int64_t bytes_per_element, Fn&& fn) {
  if (n <= 0) return;
  auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
  const int threads = workers->NumThreads();
  if (threads <= 1 || n * bytes_per_element <= kInlineBytes) {
    fn(int64_t{0}, n);
    return;
  }
  const int64_t min_block = std::max<int64_t>(kBlockAlign, kInlineBytes / (2 * bytes_per_element));
  int64_t block = (n + threads * kBlocksPerThread - 1) / (threads * kBlocksPerThread);
  block = std::max(min_block, (block + kBlockAlign - 1) / kBlockAlign * kBlockAlign);
  workers->ParallelFor(n, tensorflow::thread::ThreadPool::SchedulingParams::Fixed(block),
                       [&fn](int64_t begin, int64_t end) { fn(begin, end); });
}

}  // namespace tf_plugin
