// Runs an element range on TensorFlow's intra-op thread pool with the kernels' one sharding plan
// (kernels/sharding.h): one task per pool thread, each claiming guided blocks from a shared counter until none is
// left, while the caller waits.
#pragma once

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
  const int64_t min_block = optim_kernels::shard_min_block(n, bytes_per_element, workers->NumThreads());
  if (min_block == 0) {
    fn(int64_t{0}, n);
    return;
  }
  const int64_t tasks = optim_kernels::shard_tasks(n, workers->NumThreads(), min_block);
  std::atomic<int64_t> next{0};
  tensorflow::BlockingCounter done(static_cast<int>(tasks));
  for (int64_t t = 0; t < tasks; ++t) {
    workers->Schedule([&] {
      optim_kernels::run_claimed_blocks(next, n, tasks, min_block, fn);
      done.DecrementCount();
    });
  }
  done.Wait();
}

}  // namespace tf_plugin
