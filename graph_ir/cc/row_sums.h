// Column sums of a float32 matrix [rows, cols] accumulated in float64, for graph_ir.Session's float32 reductions over
// leading axes (ReduceSum/ReduceMean over N, H, W of NHWC data, BiasAddGrad, the batch norms' statistics;
// graph_ir/executors/reduce.py). NumPy casts such a sum through small buffers, a few elements of each row at a time;
// here each row block is one vectorizable pass.
//
// The rows go in blocks of kRowBlock. Each block's sums accumulate in float64 in row order, and the blocks' sums are
// added in block order, so the result is the same whatever the thread count (threads only claim blocks).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "graph_ir/cc/worker_pool.h"

namespace graph_ir_cc {

constexpr int64_t kRowBlock = 1024;
constexpr int64_t kThreadedElements = int64_t{4} << 20;

// acc[c] = sum of x[r, c] over rows [begin, end), in float64.
inline void sum_rows_f64(const float* x, int64_t cols, int64_t begin, int64_t end, double* acc) {
  std::fill(acc, acc + cols, 0.0);
  for (int64_t r = begin; r < end; ++r) {
    const float* row = x + r * cols;
    for (int64_t c = 0; c < cols; ++c) acc[c] += static_cast<double>(row[c]);
  }
}

// out[c] = sum over r of x[r, c], accumulated in float64 (see the file comment). `threads` >= 1: at most that many
// threads work (the caller's and the pool's).
inline void column_sums_f64(WorkerPool& pool, const float* x, int64_t rows, int64_t cols, double* out, int threads) {
  const int64_t blocks = rows == 0 ? 0 : (rows + kRowBlock - 1) / kRowBlock;
  if (blocks <= 1) {
    sum_rows_f64(x, cols, 0, rows, out);
    return;
  }
  std::vector<double> partial(static_cast<size_t>(blocks * cols));
  std::atomic<int64_t> next{0};
  auto task = [&] {
    for (int64_t b = next++; b < blocks; b = next++) {
      sum_rows_f64(x, cols, b * kRowBlock, std::min(rows, (b + 1) * kRowBlock), partial.data() + b * cols);
    }
  };
  // A memory-bound pass: below 16 MiB waking a worker costs more than it saves (measured on 1-24 MiB inputs).
  const int64_t helpers = rows * cols < kThreadedElements ? 0 : std::min<int64_t>(threads, blocks) - 1;
  if (helpers > 0) {
    pool.run(static_cast<int>(helpers), task);
  } else {
    task();
  }
  std::copy(partial.begin(), partial.begin() + cols, out);
  for (int64_t b = 1; b < blocks; ++b) {
    const double* part = partial.data() + b * cols;
    for (int64_t c = 0; c < cols; ++c) out[c] += part[c];
  }
}

}  // namespace graph_ir_cc
