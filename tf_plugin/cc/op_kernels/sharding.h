// Runs an element range on TensorFlow's intra-op thread pool with the kernels' one sharding plan
// (kernels/sharding.h).
#pragma once

#include <cstdint>

#include "kernels/sharding.h"
#include "tensorflow/core/framework/op_kernel.h"
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
  workers->ParallelFor(n, tensorflow::thread::ThreadPool::SchedulingParams::Fixed(block),
                       [&fn](int64_t begin, int64_t end) { fn(begin, end); });
}

}  // namespace tf_plugin
