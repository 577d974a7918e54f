// The kernels' loop bodies written once over a vector type Vec (kernels/simd/vec_<isa>.h), with the same
// operations in the same order as the portable loops in kernels/power_sign.h and kernels/fused_ema_adam.h, so that
// float32 results are bitwise equal on every path (NaN payloads aside). Included inside a path's namespace by
// kernels/simd/<isa>.cc only: it uses no inline function from outside that namespace, since an inline function
// compiled with AVX-512 could otherwise be picked by the linker for the portable code.
//
// A range is processed in whole vectors; the last partial vector goes through zero-padded stack copies, so every
// element takes the same instructions and nothing is read or written past the end.

inline void copy_elements(void* to, const void* from, int64_t count, int64_t size) {
  __builtin_memcpy(to, from, static_cast<size_t>(count * size));
}

// Software prefetch of each stream, OPTIM_PREFETCH_BYTES ahead, once per cache line; rw = 1 for the streams the loop
// writes. The hardware prefetcher alone left one core's loop waiting on memory: with it, float16/bfloat16 PowerSign
// at 16M elements went from 4.7 to 2.1 ms and float32 from 7.2 to 6.3 ms (2 threads; bench/NOTES.md).
#ifndef OPTIM_PREFETCH_BYTES
#define OPTIM_PREFETCH_BYTES 2048
#endif
template <int kRw, typename T>
inline void prefetch_ahead(const T* p) {
  __builtin_prefetch(reinterpret_cast<const char*>(p) + OPTIM_PREFETCH_BYTES, kRw, 3);
}

struct PowerSignVecs {
  Vec lr, beta, one_minus_beta, neg, zero, pos;
  explicit PowerSignVecs(const PowerSignScalars<float>& s)
      : lr(set1(s.lr)), beta(set1(s.beta)), one_minus_beta(set1(s.one_minus_beta)), neg(set1(s.scale_neg)),
        zero(set1(s.scale_zero)), pos(set1(s.scale_pos)) {}
};

// One vector of PowerSign, in the steps of power_sign_loop (kernels/power_sign.h): scale_neg or scale_pos by whether
// the signs of m_t and g differ; where g is zero (only needed when a scale is not finite) scale_zero; where m_t is
// zero or NaN, m_t + scale_zero.
template <bool kFiniteScales, typename T>
inline void power_sign_vector(T* var, T* m, const T* grad, const PowerSignVecs& k) {
  const Vec g = load(grad);
  const Vec m_t = k.beta * load(m) + k.one_minus_beta * g;
  Vec scale = where(signs_differ(m_t, g), k.neg, k.pos);
  if constexpr (!kFiniteScales) scale = where(is_zero(g), k.zero, scale);
  scale = add_where(zero_or_nan(m_t), m_t, k.zero, scale);
  store(m, m_t);
  store(var, load(var) - (scale * g) * k.lr);
}

// The vectors are taken by value: a local copy cannot alias the stores (16-bit stores go through may_alias types),
// so the compiler keeps them in registers instead of reloading them every iteration.
template <bool kFiniteScales, typename T>
void power_sign_loop(T* var, T* m, const T* grad, const PowerSignVecs k, int64_t begin, int64_t end) {
  constexpr int W = Vec::kWidth;
  int64_t i = begin;
#pragma GCC unroll 2
  for (; i + W <= end; i += W) {
    if ((i * sizeof(T)) % 64 == 0) {  // once per cache line of each stream
      prefetch_ahead<0>(grad + i);
      prefetch_ahead<1>(m + i);
      prefetch_ahead<1>(var + i);
    }
    power_sign_vector<kFiniteScales>(var + i, m + i, grad + i, k);
  }
  if (i < end) {
    const int64_t n = end - i;
    T tv[W] = {}, tm[W] = {}, tg[W] = {};
    copy_elements(tv, var + i, n, sizeof(T));
    copy_elements(tm, m + i, n, sizeof(T));
    copy_elements(tg, grad + i, n, sizeof(T));
    power_sign_vector<kFiniteScales>(tv, tm, tg, k);
    copy_elements(var + i, tv, n, sizeof(T));
    copy_elements(m + i, tm, n, sizeof(T));
  }
}

template <typename T>
void power_sign(T* var, T* m, const T* grad, const PowerSignScalars<float>& s, int64_t begin, int64_t end) {
  const PowerSignVecs k(s);
  if (s.finite_scales) {
    power_sign_loop<true>(var, m, grad, k, begin, end);
  } else {
    power_sign_loop<false>(var, m, grad, k, begin, end);
  }
}

struct FusedEmaAdamVecs {
  Vec lr, b1, omb1, b2, omb2, inv_c1, inv_c2, eps, wd, ema, one_minus_ema;
  explicit FusedEmaAdamVecs(const FusedEmaAdamScalars& k)
      : lr(set1(k.lr)), b1(set1(k.beta1)), omb1(set1(k.one_minus_beta1)), b2(set1(k.beta2)),
        omb2(set1(k.one_minus_beta2)), inv_c1(set1(k.inv_c1)), inv_c2(set1(k.inv_c2)), eps(set1(k.eps)),
        wd(set1(k.weight_decay)), ema(set1(k.ema_decay)), one_minus_ema(set1(k.one_minus_ema_decay)) {}
};

template <typename T, bool kDecoupled>
inline void fused_ema_adam_vector(const T* grad, T* var, T* m, T* v, T* s, const FusedEmaAdamVecs& k) {
  const Vec w = load(var);
  Vec g = load(grad);
  if constexpr (!kDecoupled) g = g + w * k.wd;
  const Vec m_out = load(m) * k.b1 + g * k.omb1;
  const Vec v_out = load(v) * k.b2 + (g * g) * k.omb2;
  Vec update = (m_out * k.inv_c1) / (sqrt(v_out * k.inv_c2) + k.eps);
  if constexpr (kDecoupled) update = update + w * k.wd;
  const Vec var_out = w - update * k.lr;
  const Vec s_out = load(s) * k.ema + var_out * k.one_minus_ema;
  store(m, m_out);
  store(v, v_out);
  store(var, var_out);
  store(s, s_out);
}

template <typename T, bool kDecoupled>
void fused_ema_adam_loop(const T* grad, T* var, T* m, T* v, T* s, const FusedEmaAdamScalars& scalars, int64_t begin,
                         int64_t end) {
  constexpr int W = Vec::kWidth;
  const FusedEmaAdamVecs k(scalars);  // a local: kept in registers (see power_sign_loop)
  int64_t i = begin;
  for (; i + W <= end; i += W) {
    if ((i * sizeof(T)) % 64 == 0) {
      prefetch_ahead<0>(grad + i);
      prefetch_ahead<1>(var + i);
      prefetch_ahead<1>(m + i);
      prefetch_ahead<1>(v + i);
      prefetch_ahead<1>(s + i);
    }
    fused_ema_adam_vector<T, kDecoupled>(grad + i, var + i, m + i, v + i, s + i, k);
  }
  if (i < end) {
    const int64_t n = end - i;
    T tg[W] = {}, tvar[W] = {}, tm[W] = {}, tv[W] = {}, ts[W] = {};
    T* state[4] = {var + i, m + i, v + i, s + i};
    T* tails[4] = {tvar, tm, tv, ts};
    copy_elements(tg, grad + i, n, sizeof(T));
    for (int a = 0; a < 4; ++a) copy_elements(tails[a], state[a], n, sizeof(T));
    fused_ema_adam_vector<T, kDecoupled>(tg, tvar, tm, tv, ts, k);
    for (int a = 0; a < 4; ++a) copy_elements(state[a], tails[a], n, sizeof(T));
  }
}

template <typename T>
void fused_ema_adam(const T* grad, T* var, T* m, T* v, T* s, const FusedEmaAdamScalars& k, int64_t begin,
                    int64_t end) {
  if (k.decoupled) {
    fused_ema_adam_loop<T, true>(grad, var, m, v, s, k, begin, end);
  } else {
    fused_ema_adam_loop<T, false>(grad, var, m, v, s, k, begin, end);
  }
}

inline constexpr KernelTable kTable = {
    power_sign<float>,     power_sign<half_t>,     power_sign<bfloat16_t>,
    fused_ema_adam<float>, fused_ema_adam<half_t>, fused_ema_adam<bfloat16_t>,
};
