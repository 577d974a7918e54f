// Tests of the sharding plan (kernels/sharding.h) without TensorFlow: the guided blocks cover [0, n) exactly once,
// with edges on multiples of 64 elements and no block below the minimum but the last, while several threads claim
// at once. Built and run by tests/kernels/test_kernels_cc.py (and by Bazel's cc_test).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/sharding.h"

using namespace optim_kernels;

namespace {

int failures = 0;

void expect(bool ok, const char* what, int64_t n, int64_t a = 0, int64_t b = 0) {
  if (ok) return;
  ++failures;
  std::printf("FAIL n=%lld: %s (%lld, %lld)\n", static_cast<long long>(n), what, static_cast<long long>(a),
              static_cast<long long>(b));
}

void test_guided_blocks(int64_t n, int64_t bytes_per_element, int64_t threads) {
  const int64_t min_block = shard_min_block(n, bytes_per_element, threads);
  if (min_block == 0) {
    expect(n * bytes_per_element <= kInlineBytes || threads <= 1, "inline above the inline size", n);
    return;
  }
  expect(min_block % kBlockAlign == 0, "minimum block not a multiple of 64", n, min_block);
  const int64_t tasks = shard_tasks(n, threads, min_block);
  std::atomic<int64_t> next{0};
  std::vector<std::vector<std::pair<int64_t, int64_t>>> claimed(tasks);
  std::vector<std::thread> workers;
  for (int64_t t = 0; t < tasks; ++t) {
    workers.emplace_back([&, t] {
      run_claimed_blocks(next, n, tasks, min_block, [&](int64_t begin, int64_t end) {
        claimed[t].push_back({begin, end});
      });
    });
  }
  for (auto& w : workers) w.join();
  std::vector<std::pair<int64_t, int64_t>> all;
  for (const auto& c : claimed) all.insert(all.end(), c.begin(), c.end());
  std::sort(all.begin(), all.end());
  int64_t at = 0;
  for (const auto& [begin, end] : all) {
    expect(begin == at && end > begin, "a gap or an overlap before block", n, begin, end);
    expect(begin % kBlockAlign == 0, "block edge not a multiple of 64", n, begin, end);
    expect(end == n || (end - begin >= min_block && end % kBlockAlign == 0), "short or unaligned block", n, begin,
           end);
    at = end;
  }
  expect(at == n, "blocks end early", n, at);
  expect(all.size() <= static_cast<size_t>(n / min_block + 1), "more blocks than minimum blocks", n,
         static_cast<int64_t>(all.size()));
}

}  // namespace

int main() {
  for (int64_t n : {int64_t{1}, int64_t{64}, int64_t{13107}, int64_t{1} << 20, (int64_t{1} << 24) + 37}) {
    for (int64_t bytes : {int64_t{10}, int64_t{36}}) {
      for (int64_t threads : {1, 2, 4, 7}) test_guided_blocks(n, bytes, threads);
    }
  }
  if (failures) {
    std::printf("%d failures\n", failures);
    return 1;
  }
  std::printf("all sharding tests passed\n");
  return 0;
}
