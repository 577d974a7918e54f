// The depthwise convolution and its two gradients on C-contiguous float32 NHWC buffers, for graph_ir.Session's
// DepthwiseConv2D executors (graph_ir/executors/depthwise.py); x [N, H, W, C], filter [kh, kw, C, M],
// y [N, Ho, Wo, C * M], as TF's DepthwiseConv2dNative (tensorflow/core/kernels/depthwise_conv_op.cc).
//
// Only taps whose input element lies inside x take part (padding contributes nothing), and each output row's (or
// input row's) valid taps are computed directly, never by testing every tap: time is in proportion to the valid
// taps. The arithmetic is the NumPy executors' order, so forward and input gradient are bitwise theirs: float32
// products added tap by tap in (i, j) order into a float32 sum from 0 (compiled with -ffp-contract=off: no fused
// multiply-add), the input gradient's sum over the multiplier as NumPy's pairwise float32 sum; the filter gradient
// sums float64 products (over n, then output rows, then columns) into a float64 buffer the caller rounds once.
// Each thread owns whole output rows (forward, input gradient) or channels (filter gradient): the result does not
// depend on the thread count. No FTZ/DAZ: subnormals as in NumPy.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>

#include "graph_ir/cc/worker_pool.h"

namespace graph_ir_cc {
namespace depthwise {

inline int64_t floor_div(int64_t a, int64_t b) {  // b > 0
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
inline int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// One spatial axis: input size, output size, taps, stride, dilation, leading pad. All < 2^31 (the caller checks),
// so every position product below fits in int64.
struct Axis {
  int64_t in = 0, out = 0, taps = 0, stride = 1, dilation = 1, pad = 0;
  // For the gather over input positions: taps t with t * dilation = p + pad (mod stride) step by step_ from the
  // solution first_tap(p) when (p + pad) is a multiple of gcd_.
  // full_lo_, full_hi_: the outputs [lo, hi) whose every tap lies inside (no division needed for them).
  int64_t gcd_ = 1, step_ = 1, inverse_ = 0, full_lo_ = 0, full_hi_ = 0;

  void prepare() {
    full_lo_ = std::min<int64_t>(out, ceil_div(pad, stride));
    full_hi_ = std::max<int64_t>(full_lo_, std::min<int64_t>(out, floor_div(in - 1 + pad - (taps - 1) * dilation,
                                                                                stride) + 1));
    int64_t a = dilation, b = stride;
    while (b != 0) {
      const int64_t t = a % b;
      a = b;
      b = t;
    }
    gcd_ = a;
    step_ = stride / gcd_;
    // inverse of (dilation / gcd) modulo step_ (extended Euclid); 0 when step_ is 1.
    int64_t r0 = (dilation / gcd_) % step_, r1 = step_, s0 = 1, s1 = 0;
    while (r1 != 0) {
      const int64_t q = r0 / r1, r2 = r0 - q * r1, s2 = s0 - q * s1;
      r0 = r1, r1 = r2, s0 = s1, s1 = s2;
    }
    inverse_ = step_ == 1 ? 0 : ((s0 % step_) + step_) % step_;
  }

  // Output position o: the taps [lo, hi) whose input position o * stride + t * dilation - pad lies inside [0, in).
  void taps_of_output(int64_t o, int64_t& lo, int64_t& hi) const {
    if (o >= full_lo_ && o < full_hi_) {
      lo = 0;
      hi = taps;
      return;
    }
    const int64_t base = o * stride - pad;
    lo = std::max<int64_t>(0, ceil_div(-base, dilation));
    hi = std::min<int64_t>(taps, floor_div(in - 1 - base, dilation) + 1);
    if (hi < lo) hi = lo;
  }

  // Input position p: the first tap, one past the last and the step of the taps t whose output position
  // (p + pad - t * dilation) / stride is an integer inside [0, out).
  void taps_of_input(int64_t p, int64_t& first, int64_t& end, int64_t& step) const {
    step = step_;
    first = end = 0;
    const int64_t shifted = p + pad;
    if (out <= 0 || shifted % gcd_ != 0) return;
    const int64_t lo = std::max<int64_t>(0, ceil_div(shifted - (out - 1) * stride, dilation));
    const int64_t hi = std::min<int64_t>(taps, floor_div(shifted, dilation) + 1);
    if (lo >= hi) return;
    const int64_t residue = step_ == 1 ? 0 : ((shifted / gcd_) % step_) * inverse_ % step_;
    first = lo + (((residue - lo) % step_) + step_) % step_;
    end = std::max(first, hi);
  }
};

struct Geometry {
  int64_t n = 0, channels = 0, multiplier = 0;
  Axis rows, cols;
};

// fn(begin, end) over [0, total) in `parts` contiguous pieces claimed by the calling thread and up to threads - 1
// workers. Which thread runs a piece never changes what it computes.
inline void run_pieces(WorkerPool& pool, int64_t total, int64_t threads, double work, int64_t pieces_per_thread,
                       const std::function<void(int64_t, int64_t)>& fn) {
  constexpr int64_t kMinWork = 1 << 16;  // multiply-adds below which a helper costs more than it saves
  const double most = std::min<double>(work / kMinWork, 1 << 20);  // (work is a double: no overflow)
  const int64_t helpers = std::max<int64_t>(1, std::min<int64_t>({threads, pool.workers() + 1, total,
                                                                    static_cast<int64_t>(most)}));
  if (helpers <= 1 || total <= 1) {
    if (total > 0) fn(0, total);
    return;
  }
  const int64_t parts = std::min<int64_t>(total, pieces_per_thread * helpers);
  std::atomic<int64_t> next{0};
  const std::function<void()> task = [&] {
    for (int64_t p = next++; p < parts; p = next++) fn(total * p / parts, total * (p + 1) / parts);
  };
  pool.run(static_cast<int>(helpers - 1), task);
}

// Runtime ISA dispatch for the vector loops (GCC/Clang function multiversioning on x86-64 Linux): an AVX2 clone and
// the baseline one, the same IEEE operations either way (no FMA: AVX2 alone, and -ffp-contract=off).
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define GRAPH_IR_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef GRAPH_IR_VECTOR_CLONES
#define GRAPH_IR_VECTOR_CLONES
#endif

// o[k] += a[k] * b[k] (float32 product, then float32 add: no contraction) for k < n; restrict so it vectorizes.
GRAPH_IR_VECTOR_CLONES inline void add_products(float* __restrict o, const float* __restrict a,
                                                const float* __restrict b, int64_t n) {
  for (int64_t k = 0; k < n; ++k) o[k] += a[k] * b[k];
}

// o[k] += double(a[k]) * double(b[k]) for k < n.
GRAPH_IR_VECTOR_CLONES inline void add_products_wide(double* __restrict o, const float* __restrict a,
                                                     const float* __restrict b, int64_t n) {
  for (int64_t k = 0; k < n; ++k) o[k] += static_cast<double>(a[k]) * static_cast<double>(b[k]);
}

// NumPy's float32 pairwise sum (numpy/_core/src/umath/loops_utils.h.src, pairwise_sum) of the products
// a[k] * b[k] for k < n: the order (g * f).sum(axis=-1) adds them in.
inline float pairwise_products(const float* a, const float* b, int64_t n) {
  if (n < 8) {
    float res = 0.0f;
    for (int64_t k = 0; k < n; ++k) res += a[k] * b[k];
    return res;
  }
  if (n <= 128) {
    float r[8];
    for (int k = 0; k < 8; ++k) r[k] = a[k] * b[k];
    int64_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int k = 0; k < 8; ++k) r[k] += a[i + k] * b[i + k];
    }
    float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i] * b[i];
    return res;
  }
  int64_t half = n / 2;
  half -= half % 8;
  return pairwise_products(a, b, half) + pairwise_products(a + half, b + half, n - half);
}

// y[n, oh, ow, c*M + m] = sum over the valid (i, j), in order, of x[n, ih, iw, c] * f[i, j, c, m].
inline void forward(WorkerPool& pool, const Geometry& g, const float* x, const float* f, float* y, int64_t threads) {
  const int64_t cm = g.channels * g.multiplier, c_count = g.channels, m_count = g.multiplier;
  const int64_t rows = g.n * g.rows.out;
  const double work = static_cast<double>(rows) * g.cols.out * cm * g.rows.taps * g.cols.taps;
  run_pieces(pool, rows, threads, work, 4, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / g.rows.out, oh = row % g.rows.out;
      float* out = y + row * g.cols.out * cm;
      std::fill(out, out + g.cols.out * cm, 0.0f);
      int64_t i0, i1;
      g.rows.taps_of_output(oh, i0, i1);
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t ih = oh * g.rows.stride + i * g.rows.dilation - g.rows.pad;
        const float* x_row = x + (n * g.rows.in + ih) * g.cols.in * c_count;
        for (int64_t ow = 0; ow < g.cols.out; ++ow) {
          int64_t j0, j1;
          g.cols.taps_of_output(ow, j0, j1);
          float* o = out + ow * cm;
          for (int64_t j = j0; j < j1; ++j) {
            const int64_t iw = ow * g.cols.stride + j * g.cols.dilation - g.cols.pad;
            const float* xs = x_row + iw * c_count;
            const float* fs = f + (i * g.cols.taps + j) * cm;
            if (m_count == 1) {
              add_products(o, xs, fs, c_count);
            } else {
              for (int64_t c = 0; c < c_count; ++c) {
                const float xv = xs[c];
                for (int64_t m = 0; m < m_count; ++m) o[c * m_count + m] += xv * fs[c * m_count + m];
              }
            }
          }
        }
      }
    }
  });
}

// dx[n, ih, iw, c] = sum over the (i, j) (in order) that reach it from an output (oh, ow) of
// sum_m dy[n, oh, ow, c*M + m] * f[i, j, c, m] (the inner sum pairwise, as NumPy's).
inline void backprop_input(WorkerPool& pool, const Geometry& g, const float* f, const float* dy, float* dx,
                           int64_t threads) {
  const int64_t cm = g.channels * g.multiplier, c_count = g.channels, m_count = g.multiplier;
  const int64_t rows = g.n * g.rows.in;
  const double work = static_cast<double>(g.n) * g.rows.out * g.cols.out * cm * g.rows.taps * g.cols.taps;
  run_pieces(pool, rows, threads, work, 4, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / g.rows.in, ih = row % g.rows.in;
      float* out = dx + row * g.cols.in * c_count;
      std::fill(out, out + g.cols.in * c_count, 0.0f);
      int64_t i0, i1, di;
      g.rows.taps_of_input(ih, i0, i1, di);
      for (int64_t i = i0; i < i1; i += di) {
        const int64_t oh = (ih + g.rows.pad - i * g.rows.dilation) / g.rows.stride;
        const float* dy_row = dy + (n * g.rows.out + oh) * g.cols.out * cm;
        for (int64_t iw = 0; iw < g.cols.in; ++iw) {
          int64_t j0, j1, dj;
          g.cols.taps_of_input(iw, j0, j1, dj);
          float* o = out + iw * c_count;
          for (int64_t j = j0; j < j1; j += dj) {
            const int64_t ow = (iw + g.cols.pad - j * g.cols.dilation) / g.cols.stride;
            const float* gs = dy_row + ow * cm;
            const float* fs = f + (i * g.cols.taps + j) * cm;
            if (m_count == 1) {
              add_products(o, gs, fs, c_count);
            } else {
              for (int64_t c = 0; c < c_count; ++c) {
                o[c] += pairwise_products(gs + c * m_count, fs + c * m_count, m_count);
              }
            }
          }
        }
      }
    }
  });
}

// df[i, j, c, m] (float64, written whole) = sum over n, oh, ow (in that order) of the float64 products
// x[n, ih, iw, c] * dy[n, oh, ow, c*M + m] over the positions where (ih, iw) lies inside x.
inline void backprop_filter(WorkerPool& pool, const Geometry& g, const float* x, const float* dy, double* df,
                            int64_t threads) {
  const int64_t cm = g.channels * g.multiplier, m_count = g.multiplier;
  const int64_t kk = g.rows.taps * g.cols.taps;
  const double work = static_cast<double>(g.n) * g.rows.out * g.cols.out * cm * kk;
  // Threads split the channels at 64-byte lines of df where the layout allows (C * M a multiple of 8 doubles): no two
  // threads add into one cache line. Segments: [0, first), then `unit`s of channels.
  int64_t unit = 1, first = 0;
  if (cm % 8 == 0) {
    const int64_t off = static_cast<int64_t>(reinterpret_cast<uintptr_t>(df) % 64) / 8;
    for (unit = 1; (unit * m_count) % 8 != 0;) ++unit;
    for (first = 0; first < unit && (off + first * m_count) % 8 != 0;) ++first;
    if (first == unit) unit = 1, first = 0;  // no channel boundary on a line: any split
  }
  const int64_t segments = 1 + (g.channels - first + unit - 1) / unit;
  const auto channel = [&](int64_t k) { return k == 0 ? 0 : std::min(g.channels, first + (k - 1) * unit); };
  // Every part streams all of x and dy (a cache line holds 16 channels): a part of fewer than 64 channels made two
  // threads slower than one (measured: C = 32, 0.63 ms on one thread, 1.0-1.8 ms on two).
  const int64_t parts = std::min<int64_t>(threads, std::max<int64_t>(1, cm / 64));
  run_pieces(pool, segments, parts, work, 1, [&](int64_t s0, int64_t s1) {
    const int64_t c0 = channel(s0), c1 = channel(s1);
    for (int64_t t = 0; t < kk; ++t) std::fill(df + t * cm + c0 * m_count, df + t * cm + c1 * m_count, 0.0);
    for (int64_t n = 0; n < g.n; ++n) {
      for (int64_t oh = 0; oh < g.rows.out; ++oh) {
        int64_t i0, i1;
        g.rows.taps_of_output(oh, i0, i1);
        const float* dy_row = dy + (n * g.rows.out + oh) * g.cols.out * cm;
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t ih = oh * g.rows.stride + i * g.rows.dilation - g.rows.pad;
          const float* x_row = x + (n * g.rows.in + ih) * g.cols.in * g.channels;
          for (int64_t ow = 0; ow < g.cols.out; ++ow) {
            int64_t j0, j1;
            g.cols.taps_of_output(ow, j0, j1);
            const float* gs = dy_row + ow * cm;
            for (int64_t j = j0; j < j1; ++j) {
              const int64_t iw = ow * g.cols.stride + j * g.cols.dilation - g.cols.pad;
              const float* xs = x_row + iw * g.channels;
              double* acc = df + (i * g.cols.taps + j) * cm;
              if (m_count == 1) {
                add_products_wide(acc + c0, xs + c0, gs + c0, c1 - c0);
              } else {
                for (int64_t c = c0; c < c1; ++c) {
                  const double xv = xs[c];
                  for (int64_t m = 0; m < m_count; ++m) {
                    acc[c * m_count + m] += xv * static_cast<double>(gs[c * m_count + m]);
                  }
                }
              }
            }
          }
        }
      }
    }
  });
}

}  // namespace depthwise
}  // namespace graph_ir_cc
