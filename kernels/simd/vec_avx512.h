// 16 float32 lanes on AVX-512F, with loads and stores of each storage type. Only for kernels/simd/avx512*.cc, which
// define OPTIM_SIMD_NS (the namespace, one per path) and are compiled with -mavx512f (and, for the bf16 variant,
// -mavx512bf16 -mavx512dq -mavx512bw). Half conversions use vcvtph2ps / vcvtps2ph (round to nearest even).
// bfloat16 stores use vcvtne2ps2bf16 where available; it flushes float32 subnormals to zero (bfloat16 can hold
// them), so a pair of vectors holding a subnormal takes the integer rounding instead, which every other path uses,
// unless the thread flushes subnormal results anyway (FTZ, as in TensorFlow and graph_ir's binding).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/float_types.h"

namespace optim_kernels::OPTIM_SIMD_NS {

struct Vec {
  static constexpr int kWidth = 16;
  using Mask = __mmask16;
  __m512 v;
};

inline Vec set1(float x) { return {_mm512_set1_ps(x)}; }
inline Vec operator+(Vec a, Vec b) { return {_mm512_add_ps(a.v, b.v)}; }
inline Vec operator-(Vec a, Vec b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline Vec operator*(Vec a, Vec b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline Vec operator/(Vec a, Vec b) { return {_mm512_div_ps(a.v, b.v)}; }
inline Vec sqrt(Vec a) { return {_mm512_sqrt_ps(a.v)}; }
inline Vec::Mask is_zero(Vec a) { return _mm512_cmp_ps_mask(a.v, _mm512_setzero_ps(), _CMP_EQ_OQ); }
inline Vec::Mask zero_or_nan(Vec a) { return _mm512_cmp_ps_mask(a.v, _mm512_setzero_ps(), _CMP_EQ_UQ); }
// a + b in the lanes of mask, src elsewhere (one masked add).
inline Vec add_where(Vec::Mask mask, Vec a, Vec b, Vec src) { return {_mm512_mask_add_ps(src.v, mask, a.v, b.v)}; }
// Lanes where the sign bits of a and b differ.
inline Vec::Mask signs_differ(Vec a, Vec b) {
  const __m512i x = _mm512_xor_si512(_mm512_castps_si512(a.v), _mm512_castps_si512(b.v));
  return _mm512_test_epi32_mask(x, _mm512_set1_epi32(INT32_MIN));
}
inline Vec::Mask is_nan(Vec a) { return _mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q); }
// where(mask, a, b): a in the lanes of mask, b elsewhere.
inline Vec where(Vec::Mask mask, Vec a, Vec b) { return {_mm512_mask_blend_ps(mask, b.v, a.v)}; }

inline Vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
inline Vec load(const half_t* p) { return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))}; }
inline Vec load(const bfloat16_t* p) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return {_mm512_castsi512_ps(_mm512_slli_epi32(wide, 16))};
}

inline void store(float* p, Vec a) { _mm512_storeu_ps(p, a.v); }
inline void store(half_t* p, Vec a) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline void store_bfloat16_rounding_in_integers(bfloat16_t* p, Vec a) {
  const __m512i x = _mm512_castps_si512(a.v);
  const __m512i high = _mm512_srli_epi32(x, 16);
  const __m512i odd = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
  const __m512i bits = _mm512_mask_or_epi32(rounded, is_nan(a), high, _mm512_set1_epi32(0x40));  // quiet NaN
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(bits));
}

#if defined(__AVX512BF16__) && defined(__AVX512DQ__) && defined(__AVX512BW__)
// 32 bfloat16 values as two float32 vectors: the even-indexed elements and the odd-indexed ones. One 64-byte load
// and two integer operations, where the natural order takes two widening shuffles and two shifts; the loop bodies
// are elementwise, so the lane order does not matter as long as the stores undo it (bodies.h, Block).
#define OPTIM_PAIRED_BFLOAT16 1
inline void load_even_odd(const bfloat16_t* p, Vec* even, Vec* odd) {
  const __m512i x = _mm512_loadu_si512(p);
  even->v = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
  odd->v = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}

// Whether this thread's float32 arithmetic neither reads nor makes subnormals: MXCSR's FTZ and DAZ set with
// underflow masked, as TensorFlow and graph_ir's binding set them around the kernels. Every value the loops store is
// the result of an add or a subtract, so then none is subnormal.
inline bool results_flush_to_zero() { return (_mm_getcsr() & 0x8840u) == 0x8840u; }

// The inverse of load_even_odd, rounding to nearest even: one vcvtne2ps2bf16 for both vectors (even elements in
// words 0-15, odd in 16-31), one word permute back to the natural order, one 64-byte store. Subnormals (which
// vcvtne2ps2bf16 flushes) take the integer rounding, in natural order; kResultsFlushed (results_flush_to_zero())
// says there are none, and drops the test, a tenth of a bfloat16 step's work in cache. bfloat16 on this path always
// goes through these two (bodies.h, Block), so there is no single-vector bfloat16 store here.
template <bool kResultsFlushed>
inline void store_even_odd(bfloat16_t* p, Vec even, Vec odd) {
  if (!kResultsFlushed &&
      __builtin_expect((_mm512_fpclass_ps_mask(even.v, 0x20) | _mm512_fpclass_ps_mask(odd.v, 0x20)) != 0, 0)) {
    const __m512i low = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i high = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    store_bfloat16_rounding_in_integers(p, {_mm512_permutex2var_ps(even.v, low, odd.v)});
    store_bfloat16_rounding_in_integers(p + 16, {_mm512_permutex2var_ps(even.v, high, odd.v)});
    return;
  }
  const __m512i halves = (__m512i)_mm512_cvtne2ps_pbh(odd.v, even.v);
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,  //
                                              23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  _mm512_storeu_si512(p, _mm512_permutexvar_epi16(interleave, halves));
}
#else
inline void store(bfloat16_t* p, Vec a) { store_bfloat16_rounding_in_integers(p, a); }
#endif

}  // namespace optim_kernels::OPTIM_SIMD_NS
