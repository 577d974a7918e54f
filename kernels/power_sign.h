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

#include "kernels/float_types.h"

namespace tfp_kernels {

template <typename C>
struct PowerSignScalars {
  C lr;
  C beta;
  C one_minus_beta;
  C scale_neg;   // exp(logbase * sign_decay * -1)
  C scale_zero;  // exp(logbase * sign_decay * 0): 1 unless the product is Inf or NaN
  C scale_pos;   // exp(logbase * sign_decay * +1)
};

// Per-call scalars, computed in C (float32 for 16-bit and float storage, float64 for double).
template <typename C>
PowerSignScalars<C> make_power_sign_scalars(C lr, C logbase, C sign_decay, C beta) {
  const C k = logbase * sign_decay;
  return {lr, beta, C(1) - beta, std::exp(k * C(-1)), std::exp(k * C(0)), std::exp(k * C(1))};
}

// sign(x) as -1, 0 or +1; NaN stays NaN, as in TensorFlow's Eigen sign (so a NaN m or grad makes var NaN).
// Written as independent selects (no nested conditionals) so that the compiler if-converts and vectorizes it.
template <typename C>
inline C sign_of(C x) {
  C r = x;                  // 0, -0 and NaN map to themselves
  r = x > C(0) ? C(1) : r;
  r = x < C(0) ? C(-1) : r;
  return r;
}

// Updates elements [begin, end) of var and m in place.
template <typename T>
void power_sign_range(T* __restrict var, T* __restrict m, const T* __restrict grad,
                      const PowerSignScalars<compute_t<T>>& s, int64_t begin, int64_t end) {
  using C = compute_t<T>;
  const C beta = s.beta, one_minus_beta = s.one_minus_beta, lr = s.lr;
  const C neg = s.scale_neg, zero = s.scale_zero, pos = s.scale_pos;
  for (int64_t i = begin; i < end; ++i) {
    const C g = widen(grad[i]);
    const C m_t = beta * widen(m[i]) + one_minus_beta * g;
    const C sign_gm = sign_of(m_t) * sign_of(g);
    C scale = sign_gm;  // NaN stays NaN
    scale = sign_gm == C(0) ? zero : scale;
    scale = sign_gm > C(0) ? pos : scale;
    scale = sign_gm < C(0) ? neg : scale;
    m[i] = narrow<T>(m_t);
    var[i] = narrow<T>(widen(var[i]) - (scale * g) * lr);
  }
}

}  // namespace tfp_kernels
