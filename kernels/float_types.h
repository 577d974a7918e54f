// Storage types and conversions for the optimizer kernels: IEEE half and bfloat16 as plain 16-bit words, widened to
// float32 for compute and narrowed back with round-to-nearest-even. Branch-free so that loops over them vectorize.
// No framework types: TensorFlow's Eigen::half / bfloat16 and ml_dtypes' are layout-compatible (one uint16_t).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace optim_kernels {

struct half_t {
  uint16_t bits;
};
struct bfloat16_t {
  uint16_t bits;
};
static_assert(sizeof(half_t) == 2 && sizeof(bfloat16_t) == 2, "16-bit storage types must be 2 bytes");

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// half -> float, exact (every half is a float). Normals rebias the exponent; subnormals are renormalized through a
// float subtraction; Inf/NaN keep their payload (NaNs made quiet). Bitwise equal to the F16C instruction.
inline float half_to_float(half_t h) {
  const uint32_t shifted_exp = 0x7c00u << 13;
  uint32_t o = (static_cast<uint32_t>(h.bits) & 0x7fffu) << 13;
  const uint32_t exp = o & shifted_exp;
  o += (127u - 15u) << 23;
  // Inf/NaN: max exponent; a NaN is made quiet (bit 22), as vcvtph2ps does.
  const uint32_t inf_nan = (o + ((128u - 16u) << 23)) | ((o & 0x007fe000u) != 0 ? 0x00400000u : 0u);
  const float sub = bits_float(o + (1u << 23)) - bits_float(113u << 23);
  o = exp == shifted_exp ? inf_nan : o;
  o = exp == 0 ? float_bits(sub) : o;
  return bits_float(o | ((static_cast<uint32_t>(h.bits) & 0x8000u) << 16));
}

// float -> half, round to nearest, ties to even; overflow gives Inf, NaN stays a quiet NaN. Bitwise equal to the
// F16C / AVX-512 instruction with round-to-nearest-even.
inline half_t float_to_half(float f) {
  uint32_t x = float_bits(f);
  const uint32_t sign = x & 0x80000000u;
  x ^= sign;
  // Values below 2^-14 become subnormals: adding 0.5f aligns the mantissa so that float rounding does RNE for us.
  const uint32_t sub = float_bits(bits_float(x) + bits_float(126u << 23)) - (126u << 23);
  // Normal range: rebias and round half to even on the 13 dropped bits.
  const uint32_t odd = (x >> 13) & 1u;
  const uint32_t normal = (x + 0xc8000fffu + odd) >> 13;
  // NaN: quiet, with the top of the payload (as vcvtps2ph does); Inf and overflow: Inf.
  const uint32_t big = x > 0x7f800000u ? (0x7e00u | ((x >> 13) & 0x3ffu)) : 0x7c00u;
  uint32_t o = normal;  // independent selects, not nested ones, so that loops vectorize
  o = x < 0x38800000u ? sub : o;
  o = x >= 0x47800000u ? big : o;
  return half_t{static_cast<uint16_t>(o | (sign >> 16))};
}

inline float bfloat16_to_float(bfloat16_t b) { return bits_float(static_cast<uint32_t>(b.bits) << 16); }

// float -> bfloat16, round to nearest, ties to even; NaN stays a quiet NaN.
inline bfloat16_t float_to_bfloat16(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const bool is_nan = (x & 0x7fffffffu) > 0x7f800000u;
  return bfloat16_t{static_cast<uint16_t>(is_nan ? ((x >> 16) | 0x40u) : rounded)};
}

// The type a storage type T computes in: float32 for the 16-bit types and float, float64 for double.
template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
inline compute_t<T> widen(T x) {
  if constexpr (std::is_same_v<T, half_t>) {
    return half_to_float(x);
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return bfloat16_to_float(x);
  } else {
    return x;
  }
}

template <typename T>
inline T narrow(compute_t<T> x) {
  if constexpr (std::is_same_v<T, half_t>) {
    return float_to_half(x);
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return float_to_bfloat16(x);
  } else {
    return x;
  }
}

}  // namespace optim_kernels
