// FusedEmaAdam, one fused pass (the Ascend ApplyFusedEmaAdam math, everything in float32):
//   (c1, c2) = (1 - beta1^step, 1 - beta2^step) if bias_correction else (1, 1)   (in float64, see below)
//   g        = grad + weight_decay * var        if mode == 0 (L2) else grad
//   m_out    = beta1 * m + (1 - beta1) * g
//   v_out    = beta2 * v + (1 - beta2) * g^2
//   update   = (m_out / c1) / (sqrt(v_out / c2) + eps)   (+ weight_decay * var if mode == 1, AdamW)
//   var_out  = var - lr * update
//   s_out    = ema_decay * s + (1 - ema_decay) * var_out
// Each element reads grad, var, m, v, s once and writes var, m, v, s once. The float32 m_out, v_out and var_out
// (not their values rounded to T) feed the update and the EMA, as on Ascend; weight decay uses the old var.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/float_types.h"
#include "kernels/fused_ema_adam_scalars.h"

namespace optim_kernels {

// Per-call scalars. The bias corrections are computed once per call in float64 from the float32 beta1, beta2 and
// the step, and rounded to float32 once (1/c1, 1/c2): the Ascend kernel's float32 powers lose up to four digits of
// c2 at small steps, which costs accuracy for nothing (these are scalars).
inline FusedEmaAdamScalars make_fused_ema_adam_scalars(float lr, float ema_decay, float beta1, float beta2, float eps,
                                                       int64_t mode, bool bias_correction, float weight_decay,
                                                       int64_t step) {
  float inv_c1 = 1.0f, inv_c2 = 1.0f;
  if (bias_correction) {
    const double t = static_cast<double>(step);
    inv_c1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(beta1), t)));
    inv_c2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(beta2), t)));
  }
  return {lr,        beta1,        1.0f - beta1, beta2, 1.0f - beta2, inv_c1, inv_c2, eps, weight_decay,
          ema_decay, 1.0f - ema_decay, mode == 1};
}

template <typename T, bool kDecoupled>
void fused_ema_adam_loop(const T* __restrict grad, T* __restrict var, T* __restrict m, T* __restrict v,
                         T* __restrict s, const FusedEmaAdamScalars& k, int64_t begin, int64_t end) {
  const float lr = k.lr, b1 = k.beta1, omb1 = k.one_minus_beta1, b2 = k.beta2, omb2 = k.one_minus_beta2;
  const float inv_c1 = k.inv_c1, inv_c2 = k.inv_c2, eps = k.eps, wd = k.weight_decay;
  const float ema = k.ema_decay, one_minus_ema = k.one_minus_ema_decay;
  for (int64_t i = begin; i < end; ++i) {
    const float w = widen(var[i]);
    float g = widen(grad[i]);
    if constexpr (!kDecoupled) g = g + w * wd;
    const float m_out = widen(m[i]) * b1 + g * omb1;
    const float v_out = widen(v[i]) * b2 + (g * g) * omb2;
    float update = (m_out * inv_c1) / (std::sqrt(v_out * inv_c2) + eps);
    if constexpr (kDecoupled) update = update + w * wd;
    const float var_out = w - update * lr;
    const float s_out = widen(s[i]) * ema + var_out * one_minus_ema;
    m[i] = narrow<T>(m_out);
    v[i] = narrow<T>(v_out);
    var[i] = narrow<T>(var_out);
    s[i] = narrow<T>(s_out);
  }
}

// The portable loop (and the reference the SIMD paths are tested against): updates [begin, end) of var, m, v, s.
// T is half_t, bfloat16_t or float.
template <typename T>
void fused_ema_adam_range(const T* grad, T* var, T* m, T* v, T* s, const FusedEmaAdamScalars& k, int64_t begin,
                          int64_t end) {
  if (k.decoupled) {
    fused_ema_adam_loop<T, true>(grad, var, m, v, s, k, begin, end);
  } else {
    fused_ema_adam_loop<T, false>(grad, var, m, v, s, k, begin, end);
  }
}

// Updates [begin, end) of var, m, v and s in place on the instruction-set path in use (kernels/isa.h).
void fused_ema_adam_update(const float* grad, float* var, float* m, float* v, float* s, const FusedEmaAdamScalars& k,
                           int64_t begin, int64_t end);
void fused_ema_adam_update(const half_t* grad, half_t* var, half_t* m, half_t* v, half_t* s,
                           const FusedEmaAdamScalars& k, int64_t begin, int64_t end);
void fused_ema_adam_update(const bfloat16_t* grad, bfloat16_t* var, bfloat16_t* m, bfloat16_t* v, bfloat16_t* s,
                           const FusedEmaAdamScalars& k, int64_t begin, int64_t end);

}  // namespace optim_kernels
