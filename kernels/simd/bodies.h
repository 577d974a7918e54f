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

// One loop step of storage type T: Block<T>::kParts float32 vectors, kParts * Vec::kWidth elements. One vector,
// unless the path packs two (OPTIM_PAIRED_BFLOAT16: bfloat16 as the even and odd elements of one 64-byte load,
// vec_avx512.h), which saves the widening shuffles of the natural order.
template <typename T>
struct Block {
  static constexpr int kParts = 1;
  Vec part[1];
};
template <typename T>
inline Block<T> load_block(const T* p) {
  return {{load(p)}};
}
// kResultsFlushed: the thread flushes subnormal results to zero (results_flush_to_zero()), so the store needs no
// test for them; only the paired bfloat16 store has one.
template <bool kResultsFlushed, typename T>
inline void store_block(T* p, const Block<T>& b) {
  store(p, b.part[0]);
}
#ifdef OPTIM_PAIRED_BFLOAT16
template <>
struct Block<bfloat16_t> {
  static constexpr int kParts = 2;
  Vec part[2];
};
template <>
inline Block<bfloat16_t> load_block(const bfloat16_t* p) {
  Block<bfloat16_t> b;
  load_even_odd(p, &b.part[0], &b.part[1]);
  return b;
}
template <bool kResultsFlushed>
inline void store_block(bfloat16_t* p, const Block<bfloat16_t>& b) {
  store_even_odd<kResultsFlushed>(p, b.part[0], b.part[1]);
}
// Whether a loop over T is worth a second instance for threads that flush subnormal results.
template <typename T>
constexpr bool kFlushMatters = std::is_same_v<T, bfloat16_t>;
#else
template <typename T>
constexpr bool kFlushMatters = false;
inline bool results_flush_to_zero() { return false; }
#endif
template <typename T>
constexpr int kBlockElements = Block<T>::kParts * Vec::kWidth;

// run(std::bool_constant<kResultsFlushed>) with kResultsFlushed = results_flush_to_zero() where that matters for T, so
// a loop gets a second instance only where its stores have a test to drop.
template <typename T, typename Run>
inline void with_results_flushed(Run run) {
  if constexpr (kFlushMatters<T>) {
    if (results_flush_to_zero()) return run(std::true_type{});
  }
  run(std::false_type{});
}

// One block of PowerSign, in the steps of power_sign_loop (kernels/power_sign.h): scale_neg or scale_pos by whether
// the signs of m_t and g differ; where g is zero (only needed when a scale is not finite) scale_zero; where m_t is
// zero or NaN, m_t + scale_zero. m is stored before var is loaded, as the portable loop does per element.
template <bool kFiniteScales, bool kResultsFlushed, typename T>
inline void power_sign_block(T* var, T* m, const T* grad, const PowerSignVecs& k) {
  const Block<T> g = load_block(grad);
  Block<T> m_t = load_block(m);
  Vec scale[Block<T>::kParts];
  for (int p = 0; p < Block<T>::kParts; ++p) {
    m_t.part[p] = k.beta * m_t.part[p] + k.one_minus_beta * g.part[p];
    scale[p] = where(signs_differ(m_t.part[p], g.part[p]), k.neg, k.pos);
    if constexpr (!kFiniteScales) scale[p] = where(is_zero(g.part[p]), k.zero, scale[p]);
    scale[p] = add_where(zero_or_nan(m_t.part[p]), m_t.part[p], k.zero, scale[p]);
  }
  store_block<kResultsFlushed>(m, m_t);
  Block<T> w = load_block(var);
  for (int p = 0; p < Block<T>::kParts; ++p) w.part[p] = w.part[p] - (scale[p] * g.part[p]) * k.lr;
  store_block<kResultsFlushed>(var, w);
}

// The vectors are taken by value: a local copy cannot alias the stores (16-bit stores go through may_alias types),
// so the compiler keeps them in registers instead of reloading them every iteration.
template <bool kFiniteScales, bool kResultsFlushed, typename T>
void power_sign_loop(T* var, T* m, const T* grad, const PowerSignVecs k, int64_t begin, int64_t end) {
  constexpr int W = kBlockElements<T>;
  int64_t i = begin;
#pragma GCC unroll 2
  for (; i + W <= end; i += W) {
    if ((i * sizeof(T)) % 64 == 0) {  // once per cache line of each stream
      prefetch_ahead<0>(grad + i);
      prefetch_ahead<1>(m + i);
      prefetch_ahead<1>(var + i);
    }
    power_sign_block<kFiniteScales, kResultsFlushed>(var + i, m + i, grad + i, k);
  }
  if (i < end) {
    const int64_t n = end - i;
    T tv[W] = {}, tm[W] = {}, tg[W] = {};
    copy_elements(tv, var + i, n, sizeof(T));
    copy_elements(tm, m + i, n, sizeof(T));
    copy_elements(tg, grad + i, n, sizeof(T));
    power_sign_block<kFiniteScales, kResultsFlushed>(tv, tm, tg, k);
    copy_elements(var + i, tv, n, sizeof(T));
    copy_elements(m + i, tm, n, sizeof(T));
  }
}

template <typename T>
void power_sign(T* var, T* m, const T* grad, const PowerSignScalars<float>& s, int64_t begin, int64_t end) {
  const PowerSignVecs k(s);
  with_results_flushed<T>([&](auto flushed) {
    if (s.finite_scales) {
      power_sign_loop<true, decltype(flushed)::value>(var, m, grad, k, begin, end);
    } else {
      power_sign_loop<false, decltype(flushed)::value>(var, m, grad, k, begin, end);
    }
  });
}

struct FusedEmaAdamVecs {
  Vec lr, b1, omb1, b2, omb2, inv_c1, inv_c2, eps, wd, ema, one_minus_ema;
  explicit FusedEmaAdamVecs(const FusedEmaAdamScalars& k)
      : lr(set1(k.lr)), b1(set1(k.beta1)), omb1(set1(k.one_minus_beta1)), b2(set1(k.beta2)),
        omb2(set1(k.one_minus_beta2)), inv_c1(set1(k.inv_c1)), inv_c2(set1(k.inv_c2)), eps(set1(k.eps)),
        wd(set1(k.weight_decay)), ema(set1(k.ema_decay)), one_minus_ema(set1(k.one_minus_ema_decay)) {}
};

template <typename T, bool kDecoupled, bool kResultsFlushed>
inline void fused_ema_adam_block(const T* grad, T* var, T* m, T* v, T* s, const FusedEmaAdamVecs& k) {
  constexpr int P = Block<T>::kParts;
  const Block<T> w = load_block(var);
  Block<T> g = load_block(grad), m_out = load_block(m), v_out = load_block(v), s_out = load_block(s), var_out;
  for (int p = 0; p < P; ++p) {
    if constexpr (!kDecoupled) g.part[p] = g.part[p] + w.part[p] * k.wd;
    m_out.part[p] = m_out.part[p] * k.b1 + g.part[p] * k.omb1;
    v_out.part[p] = v_out.part[p] * k.b2 + (g.part[p] * g.part[p]) * k.omb2;
    Vec update = (m_out.part[p] * k.inv_c1) / (sqrt(v_out.part[p] * k.inv_c2) + k.eps);
    if constexpr (kDecoupled) update = update + w.part[p] * k.wd;
    var_out.part[p] = w.part[p] - update * k.lr;
    s_out.part[p] = s_out.part[p] * k.ema + var_out.part[p] * k.one_minus_ema;
  }
  store_block<kResultsFlushed>(m, m_out);
  store_block<kResultsFlushed>(v, v_out);
  store_block<kResultsFlushed>(var, var_out);
  store_block<kResultsFlushed>(s, s_out);
}

template <typename T, bool kDecoupled, bool kResultsFlushed>
void fused_ema_adam_loop(const T* grad, T* var, T* m, T* v, T* s, const FusedEmaAdamScalars& scalars, int64_t begin,
                         int64_t end) {
  constexpr int W = kBlockElements<T>;
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
    fused_ema_adam_block<T, kDecoupled, kResultsFlushed>(grad + i, var + i, m + i, v + i, s + i, k);
  }
  if (i < end) {
    const int64_t n = end - i;
    T tg[W] = {}, tvar[W] = {}, tm[W] = {}, tv[W] = {}, ts[W] = {};
    T* state[4] = {var + i, m + i, v + i, s + i};
    T* tails[4] = {tvar, tm, tv, ts};
    copy_elements(tg, grad + i, n, sizeof(T));
    for (int a = 0; a < 4; ++a) copy_elements(tails[a], state[a], n, sizeof(T));
    fused_ema_adam_block<T, kDecoupled, kResultsFlushed>(tg, tvar, tm, tv, ts, k);
    for (int a = 0; a < 4; ++a) copy_elements(state[a], tails[a], n, sizeof(T));
  }
}

template <typename T>
void fused_ema_adam(const T* grad, T* var, T* m, T* v, T* s, const FusedEmaAdamScalars& k, int64_t begin,
                    int64_t end) {
  with_results_flushed<T>([&](auto flushed) {
    if (k.decoupled) {
      fused_ema_adam_loop<T, true, decltype(flushed)::value>(grad, var, m, v, s, k, begin, end);
    } else {
      fused_ema_adam_loop<T, false, decltype(flushed)::value>(grad, var, m, v, s, k, begin, end);
    }
  });
}

inline constexpr KernelTable kTable = {
    power_sign<float>,     power_sign<half_t>,     power_sign<bfloat16_t>,
    fused_ema_adam<float>, fused_ema_adam<half_t>, fused_ema_adam<bfloat16_t>,
};
