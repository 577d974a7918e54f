// Runs an element range on TensorFlow's intra-op thread pool with the kernels' one sharding plan
// (kernels/sharding.h): one task per pool thread, each taking the next block from a shared counter until none is
// left. A thread that starts late (woken late, or still busy with another op) then takes fewer blocks instead of
// leaving the others waiting at the end, and blocks can stay small.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/sharding.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/platform/blocking_counter.h"
#include "tensorflow/core/platform/threadpool.h"

namespace tf_plugin {

template <typename Fn>  // Fn(int64_t begin, int64_t end)
void ParallelForRange(tensorflow::OpKernelContext* ctx, int64_t n, int64_t bytes_per_element, Fn&& fn) {
  if (n <= 0) return;
  auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
  const int64_t block = optim_kernels::shard_block(n, bytes_per_element, workers->NumThreads());
  if (block == 0) {
    fn(int64_t{0}, n);
    return;
  }
  const int64_t blocks = (n + block - 1) / block;
  const int tasks = static_cast<int>(std::min<int64_t>(workers->NumThreads(), blocks));
  std::atomic<int64_t> next{0};
  tensorflow::BlockingCounter done(tasks);
  // The caller only waits, as TF's ParallelFor does when there are more blocks than threads: an op runs right
  // after others whose pool threads still spin, and a third busy thread on the same cores would slow every block.
  for (int t = 0; t < tasks; ++t) {
    workers->Schedule([&] {
      for (int64_t k = next++; k < blocks; k = next++) fn(k * block, std::min(n, (k + 1) * block));
      done.DecrementCount();
    });
  }
  done.Wait();
}

}  // namespace tf_plugin
