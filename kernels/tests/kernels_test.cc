// Tests of kernels/ without TensorFlow: every SIMD path the CPU has against the portable loop (bitwise for float32,
// same rounding for half types), each dtype, tails and empty ranges, and ranges past 2^31 (int64 indexing) through
// the range interface without allocating 8 GiB. Built and run by tests/kernels/test_kernels_cc.py (and by Bazel's
// cc_test).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "kernels/fused_ema_adam.h"
#include "kernels/isa.h"
#include "kernels/power_sign.h"
#include "kernels/simd/kernel_table.h"

using namespace optim_kernels;

namespace {

int failures = 0;

#define EXPECT(cond, ...)                        \
  do {                                           \
    if (!(cond)) {                               \
      ++failures;                                \
      std::printf("FAIL %s:%d: ", __FILE__, __LINE__); \
      std::printf(__VA_ARGS__);                  \
      std::printf("\n");                         \
    }                                            \
  } while (0)

template <typename T>
uint32_t bits(T x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, sizeof(T));
  return u;
}

template <typename T>
bool is_nan(T x) {
  return std::isnan(static_cast<float>(widen(x)));
}

// Equal bits, or both NaN (NaN payloads depend on operand order).
template <typename T>
bool same(T a, T b) {
  return bits(a) == bits(b) || (is_nan(a) && is_nan(b));
}

template <typename T>
std::vector<T> random_values(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 19), exponent(-3, 2);
  const float specials[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-40f, 3e38f, -1e-8f};
  std::vector<T> out(n);
  for (auto& x : out) {
    const int p = pick(rng);
    float v = normal(rng) * std::pow(10.0f, static_cast<float>(exponent(rng)));
    if (p == 0) v = specials[pick(rng) % 8];
    x = narrow<T>(v);
  }
  return out;
}

struct Path {
  const char* name;
  const KernelTable* table;  // nullptr: portable
};

std::vector<Path> paths() {
  std::vector<Path> out = {{"portable", nullptr}};
#if defined(__x86_64__)
  const int best = static_cast<int>(best_supported_isa());
  if (best >= static_cast<int>(Isa::kAvx2)) out.push_back({"avx2", &kAvx2Kernels});
  if (best >= static_cast<int>(Isa::kAvx512)) out.push_back({"avx512", &kAvx512Kernels});
  if (best >= static_cast<int>(Isa::kAvx512Bf16)) out.push_back({"avx512bf16", &kAvx512Bf16Kernels});
#endif
  return out;
}

template <typename T>
void power_sign_on(const Path& p, T* var, T* m, const T* g, const PowerSignScalars<float>& s, int64_t b, int64_t e) {
  if (p.table == nullptr) return power_sign_range(var, m, g, s, b, e);
  if constexpr (std::is_same_v<T, float>) p.table->power_sign_f32(var, m, g, s, b, e);
  if constexpr (std::is_same_v<T, half_t>) p.table->power_sign_f16(var, m, g, s, b, e);
  if constexpr (std::is_same_v<T, bfloat16_t>) p.table->power_sign_bf16(var, m, g, s, b, e);
}

template <typename T>
void fused_on(const Path& p, const T* g, T* var, T* m, T* v, T* s, const FusedEmaAdamScalars& k, int64_t b,
              int64_t e) {
  if (p.table == nullptr) return fused_ema_adam_range(g, var, m, v, s, k, b, e);
  if constexpr (std::is_same_v<T, float>) p.table->fused_ema_adam_f32(g, var, m, v, s, k, b, e);
  if constexpr (std::is_same_v<T, half_t>) p.table->fused_ema_adam_f16(g, var, m, v, s, k, b, e);
  if constexpr (std::is_same_v<T, bfloat16_t>) p.table->fused_ema_adam_bf16(g, var, m, v, s, k, b, e);
}

// A plain scalar reference, written from the formula independently of the kernel's selects.
void power_sign_reference(float& var, float& m, float g, float lr, float logbase, float sign_decay, float beta) {
  const float m_t = beta * m + (1.0f - beta) * g;
  const float sm = m_t > 0 ? 1.0f : (m_t < 0 ? -1.0f : (std::isnan(m_t) ? NAN : 0.0f));
  const float sg = g > 0 ? 1.0f : (g < 0 ? -1.0f : (std::isnan(g) ? NAN : 0.0f));
  var = var - (std::exp(logbase * sign_decay * (sm * sg)) * g) * lr;
  m = m_t;
}

template <typename T>
void test_power_sign_paths(const char* dtype) {
  std::mt19937 rng(7);
  const auto s = make_power_sign_scalars<float>(0.03f, 0.7f, 0.9f, 0.8f);
  const auto s_inf = make_power_sign_scalars<float>(0.03f, 200.0f, 1.0f, 0.8f);  // exp overflows: the full path
  for (const auto& scalars : {s, s_inf}) {
    for (int64_t n : {0, 1, 7, 15, 16, 17, 31, 33, 64, 100, 1000}) {
      const auto var0 = random_values<T>(rng, n), m0 = random_values<T>(rng, n), g = random_values<T>(rng, n);
      std::vector<T> want_var = var0, want_m = m0;
      power_sign_on(paths()[0], want_var.data(), want_m.data(), g.data(), scalars, 0, n);
      for (const auto& p : paths()) {
        // Split at an odd point: two ranges must give what one range gives (tails inside the array).
        std::vector<T> var = var0, m = m0;
        const int64_t cut = n / 3;
        power_sign_on(p, var.data(), m.data(), g.data(), scalars, 0, cut);
        power_sign_on(p, var.data(), m.data(), g.data(), scalars, cut, n);
        for (int64_t i = 0; i < n; ++i) {
          EXPECT(same(var[i], want_var[i]) && same(m[i], want_m[i]), "power_sign %s %s n=%lld i=%lld", p.name,
                 dtype, static_cast<long long>(n), static_cast<long long>(i));
        }
        power_sign_on(p, var.data(), m.data(), g.data(), scalars, 5, 5);  // an empty range writes nothing
        for (int64_t i = 0; i < n; ++i) EXPECT(same(var[i], want_var[i]), "empty range wrote %s", p.name);
      }
    }
  }
}

template <typename T>
void test_fused_paths(const char* dtype) {
  std::mt19937 rng(8);
  for (int mode : {0, 1}) {
    const auto k = make_fused_ema_adam_scalars(0.01f, 0.9f, 0.8f, 0.99f, 1e-6f, mode, true, 0.02f, 3);
    for (int64_t n : {0, 1, 9, 16, 17, 47, 1000}) {
      const auto g = random_values<T>(rng, n), var0 = random_values<T>(rng, n), m0 = random_values<T>(rng, n);
      auto v0 = random_values<T>(rng, n);
      for (auto& x : v0) x = narrow<T>(std::fabs(widen(x)));
      const auto s0 = random_values<T>(rng, n);
      std::vector<T> wv = var0, wm = m0, wvv = v0, ws = s0;
      fused_on(paths()[0], g.data(), wv.data(), wm.data(), wvv.data(), ws.data(), k, 0, n);
      for (const auto& p : paths()) {
        std::vector<T> var = var0, m = m0, v = v0, s = s0;
        fused_on(p, g.data(), var.data(), m.data(), v.data(), s.data(), k, 0, n);
        for (int64_t i = 0; i < n; ++i) {
          EXPECT(same(var[i], wv[i]) && same(m[i], wm[i]) && same(v[i], wvv[i]) && same(s[i], ws[i]),
                 "fused_ema_adam %s %s mode %d n=%lld i=%lld", p.name, dtype, mode, static_cast<long long>(n),
                 static_cast<long long>(i));
        }
      }
    }
  }
}

void test_power_sign_against_scalar_reference() {
  std::mt19937 rng(9);
  const int64_t n = 4099;
  auto var = random_values<float>(rng, n), m = random_values<float>(rng, n);
  const auto g = random_values<float>(rng, n);
  auto rv = var, rm = m;
  power_sign_update(var.data(), m.data(), g.data(), make_power_sign_scalars<float>(0.03f, 0.7f, 0.9f, 0.8f), 0, n);
  for (int64_t i = 0; i < n; ++i) {
    power_sign_reference(rv[i], rm[i], g[i], 0.03f, 0.7f, 0.9f, 0.8f);
    // The reference evaluates exp per element; the kernel picks one of three precomputed exps: the same values.
    EXPECT(same(var[i], rv[i]) && same(m[i], rm[i]), "power_sign vs reference i=%lld: %g vs %g",
           static_cast<long long>(i), var[i], rv[i]);
  }
}

// Ranges beyond 2^31 through the range interface: pointers offset back by 3 * 2^31 elements, so that indices
// [3 * 2^31, 3 * 2^31 + n) address the small buffer (never dereferenced outside it).
void test_indices_past_2_31() {
  const int64_t base = int64_t{3} << 31, n = 1000;
  std::mt19937 rng(10);
  for (const auto& p : paths()) {
    auto var = random_values<float>(rng, n), m = random_values<float>(rng, n);
    const auto g = random_values<float>(rng, n);
    auto want_var = var, want_m = m;
    const auto s = make_power_sign_scalars<float>(0.03f, 0.7f, 0.9f, 0.8f);
    power_sign_on(paths()[0], want_var.data(), want_m.data(), g.data(), s, 0, n);
    const auto shift = [&](auto* ptr) { return reinterpret_cast<decltype(ptr)>(reinterpret_cast<uintptr_t>(ptr) -
                                                                              static_cast<uintptr_t>(base) * 4u); };
    power_sign_on(p, shift(var.data()), shift(m.data()), shift(g.data()), s, base, base + n);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT(same(var[i], want_var[i]) && same(m[i], want_m[i]), "2^31 offset %s i=%lld", p.name,
             static_cast<long long>(i));
    }
  }
}

// FTZ and DAZ set on this thread for the scope, as TensorFlow and graph_ir's binding set them around the kernels
// (the kernels then skip the AVX512_BF16 store's subnormal test: no result can be subnormal).
class FlushSubnormals {
 public:
#if defined(__x86_64__) || defined(__i386__)
  FlushSubnormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
  ~FlushSubnormals() { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
#endif
};

// bfloat16 results that are float32 subnormals, one at a time in each lane of a 64-element range: the AVX512_BF16
// stores (which flush them) must fall back to the integer rounding, and put every lane back in place (the paired
// path holds even and odd elements in separate vectors). With `flushed` (FTZ/DAZ set), every path gives zero there.
void test_bfloat16_subnormal_lanes(bool flushed) {
  const auto s = make_power_sign_scalars<float>(0.03f, 0.7f, 0.9f, 0.5f);
  std::mt19937 rng(11);
  for (int lane = 0; lane < 64; ++lane) {
    const int64_t n = 64;
    auto var0 = random_values<bfloat16_t>(rng, n), m0 = random_values<bfloat16_t>(rng, n);
    auto g = random_values<bfloat16_t>(rng, n);
    for (auto* x : {&var0[lane], &m0[lane], &g[lane]}) *x = narrow<bfloat16_t>(0.0f);
    m0[lane] = narrow<bfloat16_t>(2e-38f);  // m_t = 0.5 * 2e-38: subnormal; var stays 0
    std::vector<bfloat16_t> want_var = var0, want_m = m0;
    power_sign_on(paths()[0], want_var.data(), want_m.data(), g.data(), s, 0, n);
#if defined(__x86_64__) || defined(__i386__)
    if (flushed) {
      EXPECT((bits(want_m[lane]) & 0x7fff) == 0, "lane %d: m_t is not flushed under FTZ", lane);
    } else {
      EXPECT(bits(want_m[lane]) != 0 && (bits(want_m[lane]) & 0x7f80) == 0, "lane %d: m_t is not a subnormal", lane);
    }
#endif
    for (const auto& p : paths()) {
      std::vector<bfloat16_t> var = var0, m = m0;
      power_sign_on(p, var.data(), m.data(), g.data(), s, 0, n);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT(same(var[i], want_var[i]) && same(m[i], want_m[i]), "bfloat16 subnormal in lane %d: %s i=%lld", lane,
               p.name, static_cast<long long>(i));
      }
    }
  }
}

void test_conversions() {
  // Every half and bfloat16 pattern survives widen then narrow (NaNs stay NaN, quiet).
  for (uint32_t b = 0; b < 65536; ++b) {
    const half_t h{static_cast<uint16_t>(b)};
    const half_t back = float_to_half(half_to_float(h));
    EXPECT(back.bits == b || (is_nan(h) && is_nan(back) && (back.bits & 0x200)), "half %04x -> %04x", b, back.bits);
    const bfloat16_t f{static_cast<uint16_t>(b)};
    const bfloat16_t fb = float_to_bfloat16(bfloat16_to_float(f));
    EXPECT(fb.bits == b || (is_nan(f) && is_nan(fb)), "bfloat16 %04x -> %04x", b, fb.bits);
  }
  // Ties round to even.
  EXPECT(float_to_half(1.0f + 0x1p-11f).bits == 0x3c00, "half tie to even (down)");
  EXPECT(float_to_half(1.0f + 3 * 0x1p-11f).bits == 0x3c02, "half tie to even (up)");
  EXPECT(float_to_bfloat16(1.0f + 0x1p-8f).bits == 0x3f80, "bfloat16 tie to even");
  EXPECT(float_to_half(65520.0f).bits == 0x7c00, "half overflow to Inf");
}

}  // namespace

int main() {
  std::printf("paths:");
  for (const auto& p : paths()) std::printf(" %s", p.name);
  std::printf("\n");
  test_conversions();
  test_power_sign_paths<float>("float32");
  test_power_sign_paths<half_t>("float16");
  test_power_sign_paths<bfloat16_t>("bfloat16");
  test_fused_paths<float>("float32");
  test_fused_paths<half_t>("float16");
  test_fused_paths<bfloat16_t>("bfloat16");
  test_power_sign_against_scalar_reference();
  test_indices_past_2_31();
  test_bfloat16_subnormal_lanes(false);
  {
    // The same under FTZ/DAZ, as the kernels run in TensorFlow and graph_ir: every path against the portable loop.
    const FlushSubnormals flush;
    test_power_sign_paths<bfloat16_t>("bfloat16 with FTZ");
    test_fused_paths<bfloat16_t>("bfloat16 with FTZ");
    test_bfloat16_subnormal_lanes(true);
  }
  if (failures) {
    std::printf("%d failures\n", failures);
    return 1;
  }
  std::printf("all kernel tests passed\n");
  return 0;
}
