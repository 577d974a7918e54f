// The practical memory-bandwidth limit of an optimizer step: a read-modify-write pass with the same streams
// (reads of every input, writes of every state array), vectorized and split over threads like our kernels.
// Built and loaded by bench/rmw_reference.py; not part of the package.
#include <cstdint>
#include <thread>
#include <vector>

namespace {

// Updates `kWrites` state arrays from one read-only array in one interleaved pass per element, as the fused kernels do.
template <typename T, int kWrites>
void rmw_fused(T* const* arrays, int64_t begin, int64_t end) {
  const T* __restrict in = arrays[0];
  T* __restrict a = arrays[1];
  T* __restrict b = arrays[2];
  T* __restrict c = arrays[kWrites > 2 ? 3 : 1];
  T* __restrict d = arrays[kWrites > 3 ? 4 : 1];
  for (int64_t i = begin; i < end; ++i) {
    const T x = in[i];
    a[i] = static_cast<T>(a[i] + x);
    b[i] = static_cast<T>(b[i] + x);
    if constexpr (kWrites == 4) {
      c[i] = static_cast<T>(c[i] + x);
      d[i] = static_cast<T>(d[i] + x);
    }
  }
}

template <typename T>
void run(void** arrays, int writes, int64_t n, int threads) {
  T** typed = reinterpret_cast<T**>(arrays);
  std::vector<std::thread> pool;
  const int64_t chunk = (n + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const int64_t begin = t * chunk, end = begin + chunk < n ? begin + chunk : n;
    pool.emplace_back([=] {
      if (writes == 4) {
        rmw_fused<T, 4>(typed, begin, end);
      } else {
        rmw_fused<T, 2>(typed, begin, end);
      }
    });
  }
  for (auto& th : pool) th.join();
}

}  // namespace

// arrays[0] is read; arrays[1..writes] (writes 2 or 4) are read and written. element_size 4 (float) or 2 (uint16).
extern "C" void rmw_copy(void** arrays, int writes, int64_t n, int element_size, int threads) {
  if (element_size == 4) {
    run<float>(arrays, writes, n, threads);
  } else {
    run<uint16_t>(arrays, writes, n, threads);
  }
}
