// graph_ir._binding's conv2d_direct_filter (graph_ir/cc/direct_conv_binding.h): the float32 filter gradient of the
// NHWC convolution computed directly, for graph_ir.Session's Conv2DBackpropFilter (graph_ir/executors/conv.py), on
// CPUs with AVX-512. df[i, j, c, o] = sum over the output positions whose tap (i, j) reads inside x of
// x[n, that position, c] * dy[n, output position, o], as TF's Conv2DBackpropFilter with SAME padding
// (tensorflow/core/kernels/conv_grad_filter_ops.cc): padding contributes nothing.
//
// A block of PC input channels by 16 * V output channels keeps its sums in registers while the valid positions of a
// tap stream past, image by image, whole output rows up to 256 positions at a time (one row at a time, all taps of
// it in turn, for images too large for the cache): each x value is broadcast and multiplied into V vectors of dy by
// fused multiply-adds. Those float32 sums are added in float64 in a fixed order, and df is their rounding: as
// accurate as TF's kernel or more (tests/graph_ir/test_accuracy.py).
// Threads own whole (channel block, output block) pairs, so the result does not depend on the thread count; each
// reads an image's x and dy once per tap, from cache where the image is small.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "graph_ir/cc/direct_conv.h"

namespace graph_ir_cc {
namespace direct_conv {

// The outputs [lo, hi) of axis a whose tap t reads inside [0, a.in).
inline void outputs_of_tap(const Axis& a, int64_t t, int64_t& lo, int64_t& hi) {
  const int64_t shift = t * a.dilation - a.pad;  // the input position of output o is o * stride + shift
  lo = std::max<int64_t>(0, depthwise::ceil_div(-shift, a.stride));
  hi = std::min<int64_t>(a.out, depthwise::floor_div(a.in - 1 - shift, a.stride) + 1);
  if (hi < lo) hi = lo;
}

#if GRAPH_IR_DIRECT_CONV

constexpr int64_t kPositionsPerSum = 256;  // the most output positions one float32 sum runs over (whole rows)
constexpr int64_t kImageBytes = 256 << 10;  // an image's block of dy up to which it goes tap by tap

inline __mmask16 lanes_mask(int64_t lanes) {
  return lanes >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << std::max<int64_t>(lanes, 0)) - 1);
}

// sums[i, j] (float64 [PC][16 * V]) += the float32 sum of the products of tap (i, j) over the output rows
// [r0, r1) and columns [lo, hi) of image n (all of whose reads lie inside x).
template <int PC, int V>
__attribute__((target("avx512f"))) inline void tap_products(const float* x, const float* dy, double* sums,
                                                            const Geometry& g, int64_t n, int64_t r0, int64_t r1,
                                                            int64_t i, int64_t j, int64_t lo, int64_t hi, int64_t c0,
                                                            int64_t o0, int64_t valid) {
  const int64_t in = g.in, out_channels = g.out;
  const int64_t shift = j * g.cols.dilation - g.cols.pad, x_step = g.cols.stride * in;
  __mmask16 masks[V];
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) masks[v] = lanes_mask(valid - 16 * v);
  __m512 acc[PC][V];
#pragma GCC unroll 32
  for (int k = 0; k < PC * V; ++k) acc[k / V][k % V] = _mm512_setzero_ps();
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t in_row = r * g.rows.stride + i * g.rows.dilation - g.rows.pad;
    const float* xs = x + ((n * g.rows.in + in_row) * g.cols.in + lo * g.cols.stride + shift) * in + c0;
    const float* ds = dy + ((n * g.rows.out + r) * g.cols.out + lo) * out_channels + o0;
    for (int64_t col = lo; col < hi; ++col) {
      __m512 d[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) d[v] = _mm512_maskz_loadu_ps(masks[v], ds + 16 * v);
#pragma GCC unroll 8
      for (int p = 0; p < PC; ++p) {
        const __m512 value = _mm512_set1_ps(xs[p]);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[p][v] = _mm512_fmadd_ps(value, d[v], acc[p][v]);
      }
      xs += x_step;
      ds += out_channels;
    }
  }
  double* out = sums + (i * g.cols.taps + j) * PC * 16 * V;  // this tap's [PC][16 * V] float64 sums
#pragma GCC unroll 32
  for (int k = 0; k < PC * V; ++k) {  // lanes past `valid` hold zeros (dy was read as zeros there)
    double* at = out + k * 16;
    const __m512 a = acc[k / V][k % V];
    const __m512d low = _mm512_cvtps_pd(_mm512_castps512_ps256(a));
    const __m512d high = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    _mm512_storeu_pd(at, _mm512_add_pd(_mm512_loadu_pd(at), low));
    _mm512_storeu_pd(at + 8, _mm512_add_pd(_mm512_loadu_pd(at + 8), high));
  }
}

// The whole of df's block (input channels [c0, c0 + PC), outputs [o0, o0 + valid)): every row's products added
// in float64 in order of (n, row), tap by tap, then rounded once into df.
template <int PC, int V>
__attribute__((target("avx512f"))) void filter_block(const float* x, const float* dy, float* df, const Geometry& g,
                                                     int64_t c0, int64_t o0, int64_t valid) {
  const int64_t taps = g.rows.taps * g.cols.taps;
  std::vector<double> sums(static_cast<size_t>(taps * PC * 16 * V), 0.0);
  // An image whose block of dy stays in cache goes tap by tap over runs of rows; a larger one row by row, all taps
  // of a row while it is in cache.
  const bool by_rows = g.rows.out * g.cols.out * 16 * V * static_cast<int64_t>(sizeof(float)) > kImageBytes;
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t r = 0; r < (by_rows ? g.rows.out : 1); ++r) {
      for (int64_t i = 0; i < g.rows.taps; ++i) {
        int64_t rlo, rhi;
        outputs_of_tap(g.rows, i, rlo, rhi);
        if (by_rows) {
          if (r < rlo || r >= rhi) continue;
          rlo = r, rhi = r + 1;
        }
        for (int64_t j = 0; j < g.cols.taps; ++j) {
          int64_t lo, hi;
          outputs_of_tap(g.cols, j, lo, hi);
          if (lo >= hi) continue;
          const int64_t rows = std::max<int64_t>(1, kPositionsPerSum / (hi - lo));  // a float32 sum's rows
          for (int64_t r0 = rlo; r0 < rhi; r0 += rows) {
            tap_products<PC, V>(x, dy, sums.data(), g, n, r0, std::min(r0 + rows, rhi), i, j, lo, hi, c0, o0, valid);
          }
        }
      }
    }
  }
  for (int64_t t = 0; t < taps; ++t)
    for (int p = 0; p < PC; ++p)
      for (int64_t l = 0; l < valid; ++l)
        df[(t * g.in + c0 + p) * g.out + o0 + l] = static_cast<float>(sums[(t * PC + p) * 16 * V + l]);
}

constexpr int kChannels = 6;  // PC: 6 x 4 vectors of sums

template <int V, int PC = kChannels>
__attribute__((target("avx512f"))) void filter_block_of(int pc, const float* x, const float* dy, float* df,
                                                        const Geometry& g, int64_t c0, int64_t o0, int64_t valid) {
  if constexpr (PC >= 1) {
    if (pc == PC) return filter_block<PC, V>(x, dy, df, g, c0, o0, valid);
    filter_block_of<V, PC - 1>(pc, x, dy, df, g, c0, o0, valid);
  }
}

#endif  // GRAPH_IR_DIRECT_CONV

// df [kh, kw, C, O] = the filter gradient of x [N, H, W, C] and dy [N, Ho, Wo, O], over `threads` threads, each
// owning whole (channel block, output block) pairs.
inline void backprop_filter(WorkerPool& pool, const Geometry& g, const float* x, const float* dy, float* df,
                            int threads) {
#if GRAPH_IR_DIRECT_CONV
  const int V = vectors_for(g.out);
  const int64_t lanes = 16 * V, channel_blocks = (g.in + kChannels - 1) / kChannels;
  const int64_t output_blocks = (g.out + lanes - 1) / lanes;
  const double work = static_cast<double>(g.n) * g.rows.out * g.cols.out * g.rows.taps * g.cols.taps * g.in * g.out;
  depthwise::run_pieces(pool, channel_blocks * output_blocks, threads, work, 4, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t cb = item % channel_blocks, ob = item / channel_blocks;
      const int64_t c0 = cb * kChannels, o0 = ob * lanes, valid = std::min(lanes, g.out - o0);
      const int pc = static_cast<int>(std::min<int64_t>(kChannels, g.in - c0));
      switch (V) {
        case 1: filter_block_of<1>(pc, x, dy, df, g, c0, o0, valid); break;
        case 2: filter_block_of<2>(pc, x, dy, df, g, c0, o0, valid); break;
        case 3: filter_block_of<3>(pc, x, dy, df, g, c0, o0, valid); break;
        default: filter_block_of<4>(pc, x, dy, df, g, c0, o0, valid); break;
      }
    }
  });
#else
  (void)pool, (void)g, (void)x, (void)dy, (void)df, (void)threads;
#endif
}

}  // namespace direct_conv
}  // namespace graph_ir_cc
