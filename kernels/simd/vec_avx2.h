// 8 float32 lanes on AVX2 + F16C, with loads and stores of each storage type. Only for kernels/simd/avx2.cc, which
// is compiled with -mavx2 -mf16c -mfma (FMA is never used: -ffp-contract=off keeps multiply and add separate, so
// float32 results are bitwise those of the portable loop). bfloat16 stores round in integer arithmetic.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/float_types.h"

namespace optim_kernels::avx2 {

struct Vec {
  static constexpr int kWidth = 8;
  using Mask = __m256;  // all-ones lanes where true
  __m256 v;
};

inline Vec set1(float x) { return {_mm256_set1_ps(x)}; }
inline Vec operator+(Vec a, Vec b) { return {_mm256_add_ps(a.v, b.v)}; }
inline Vec operator-(Vec a, Vec b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline Vec operator*(Vec a, Vec b) { return {_mm256_mul_ps(a.v, b.v)}; }
inline Vec operator/(Vec a, Vec b) { return {_mm256_div_ps(a.v, b.v)}; }
inline Vec sqrt(Vec a) { return {_mm256_sqrt_ps(a.v)}; }
inline Vec::Mask is_zero(Vec a) { return _mm256_cmp_ps(a.v, _mm256_setzero_ps(), _CMP_EQ_OQ); }
inline Vec::Mask zero_or_nan(Vec a) { return _mm256_cmp_ps(a.v, _mm256_setzero_ps(), _CMP_EQ_UQ); }
// a + b in the lanes of mask, src elsewhere.
inline Vec add_where(Vec::Mask mask, Vec a, Vec b, Vec src) {
  return {_mm256_blendv_ps(src.v, _mm256_add_ps(a.v, b.v), mask)};
}
// Lanes where the sign bits of a and b differ (blendv reads only the sign bit of a mask lane).
inline Vec::Mask signs_differ(Vec a, Vec b) { return _mm256_xor_ps(a.v, b.v); }
inline Vec::Mask is_nan(Vec a) { return _mm256_cmp_ps(a.v, a.v, _CMP_UNORD_Q); }
inline Vec where(Vec::Mask mask, Vec a, Vec b) { return {_mm256_blendv_ps(b.v, a.v, mask)}; }

inline Vec load(const float* p) { return {_mm256_loadu_ps(p)}; }
inline Vec load(const half_t* p) { return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))}; }
inline Vec load(const bfloat16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return {_mm256_castsi256_ps(_mm256_slli_epi32(wide, 16))};
}

inline void store(float* p, Vec a) { _mm256_storeu_ps(p, a.v); }
inline void store(half_t* p, Vec a) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline void store(bfloat16_t* p, Vec a) {
  const __m256i x = _mm256_castps_si256(a.v);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), 16);
  const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  const __m256i bits = _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(rounded), _mm256_castsi256_ps(quiet_nan), is_nan(a)));
  // Pack the eight 32-bit words (each < 2^16) to 16 bits: packus works per 128-bit lane, so gather lanes 0 and 2.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bits, bits), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}

}  // namespace optim_kernels::avx2
