// PowerSign, one fused pass (the Ascend InplaceApplyPowerSign math):
//   m_t     = beta * m + (1 - beta) * grad
//   sign_gm = sign(m_t) * sign(grad)                       sign(0) = 0
//   var_t   = var - lr * exp(logbase * sign_decay * sign_gm) * grad
// Each element reads var, m, grad once and writes m, var once. The exponential takes three values per call
// (sign_gm is -1, 0 or +1), so it is evaluated three times per call, not per element: bit-identical to per-element
// exp. Order of operations follows the Ascend kernel: (exp * grad) * lr.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/float_types.h"
#include "kernels/power_sign_scalars.h"

namespace optim_kernels {

// Per-call scalars, computed in C (float32 for 16-bit and float storage, float64 for double).
template <typename C>
PowerSignScalars<C> make_power_sign_scalars(C lr, C logbase, C sign_decay, C beta) {
  const C k = logbase * sign_decay;
  const C neg = std::exp(k * C(-1)), zero = std::exp(k * C(0)), pos = std::exp(k * C(1));
  const bool finite = std::isfinite(neg) && std::isfinite(zero) && std::isfinite(pos);
  return {lr, beta, C(1) - beta, neg, zero, pos, finite};
}

// exp(k * sign(m_t) * sign(g)) picked from the three precomputed values, as independent selects (so that the loop
// vectorizes), in the same steps as kernels/simd/bodies.h: scale_neg or scale_pos by whether the signs of m_t and g
// differ; then, where m_t is zero or NaN, m_t + scale_zero (scale_zero itself, or the NaN that a NaN m or grad
// makes). With finite scales a zero g needs no test: scale * (+-0) is +-0 for any positive finite scale. Otherwise
// (an Inf or NaN scale) a zero g also takes scale_zero, as sign(g) = 0 does in the formula.
template <bool kFiniteScales, typename T>
void power_sign_loop(T* __restrict var, T* __restrict m, const T* __restrict grad,
                     const PowerSignScalars<compute_t<T>>& s, int64_t begin, int64_t end) {
  using C = compute_t<T>;
  using Bits = std::conditional_t<sizeof(C) == 8, uint64_t, uint32_t>;
  const C beta = s.beta, one_minus_beta = s.one_minus_beta, lr = s.lr;
  const C neg = s.scale_neg, zero = s.scale_zero, pos = s.scale_pos;
  for (int64_t i = begin; i < end; ++i) {
    const C g = widen(grad[i]);
    const C m_t = beta * widen(m[i]) + one_minus_beta * g;
    Bits mb, gb;
    std::memcpy(&mb, &m_t, sizeof(mb));
    std::memcpy(&gb, &g, sizeof(gb));
    C scale = ((mb ^ gb) >> (8 * sizeof(Bits) - 1)) != 0 ? neg : pos;
    if constexpr (!kFiniteScales) scale = g == C(0) ? zero : scale;
    scale = (m_t == C(0)) | (m_t != m_t) ? m_t + zero : scale;
    m[i] = narrow<T>(m_t);
    var[i] = narrow<T>(widen(var[i]) - (scale * g) * lr);
  }
}

// The portable loop (and the reference the SIMD paths are tested against): updates [begin, end) of var and m.
template <typename T>
void power_sign_range(T* var, T* m, const T* grad, const PowerSignScalars<compute_t<T>>& s, int64_t begin,
                      int64_t end) {
  if (s.finite_scales) {
    power_sign_loop<true>(var, m, grad, s, begin, end);
  } else {
    power_sign_loop<false>(var, m, grad, s, begin, end);
  }
}

// Updates [begin, end) of var and m in place on the instruction-set path in use (kernels/isa.h). float64 always
// runs the portable loop.
void power_sign_update(float* var, float* m, const float* grad, const PowerSignScalars<float>& s, int64_t begin,
                       int64_t end);
void power_sign_update(half_t* var, half_t* m, const half_t* grad, const PowerSignScalars<float>& s, int64_t begin,
                       int64_t end);
void power_sign_update(bfloat16_t* var, bfloat16_t* m, const bfloat16_t* grad, const PowerSignScalars<float>& s,
                       int64_t begin, int64_t end);
void power_sign_update(double* var, double* m, const double* grad, const PowerSignScalars<double>& s, int64_t begin,
                       int64_t end);

}  // namespace optim_kernels
