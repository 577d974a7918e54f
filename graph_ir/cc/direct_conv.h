// graph_ir._binding's conv2d_direct (graph_ir/cc/direct_conv_binding.h): the float32 NHWC convolution computed
// directly, for graph_ir.Session's Conv2D and its stride-1 input gradient (graph_ir/executors/conv.py), on CPUs with
// AVX-512. y[n, o, p, :] = sum over the taps (i, j) whose input position (o*sh + i*dh - top, p*sw + j*dw - left)
// lies inside x of x[n, that position, :] @ filter[i, j] (filter [kh, kw, C, O]), as TF's Conv2D with SAME padding
// (tensorflow/core/kernels/conv_ops.cc): padding contributes nothing, so a NaN or inf tap never meets a padded zero.
//
// The way oneDNN's direct convolutions work (no im2col copy): the filter is packed once into blocks of 16 * V
// output channels ([block][kh][kw][C][16 * V], zero lanes past O), and a block of P output positions of one row
// keeps its P x V vectors of sums in registers while the taps and input channels stream past: each input value is
// broadcast and multiplied into V filter vectors by fused multiply-adds. Each output is one float32 sum over its
// valid taps in (i, j, c) order, as im2col's products and oneDNN's kernels add them (another order, such as a sum
// per tap row, is as accurate but moves whole-model steps further from TF's: max-pool ties and ReLU signs flip),
// whoever computes it: the result does not depend on the thread count. Time is in
// proportion to the valid taps (those of padding are skipped, never multiplied). 3x3 layers of VGG16 run at 140-170
// GFLOP/s a core here, against 96-125 for im2col and oneMKL's sgemm with the copy (bench/bench_gemm.py).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GRAPH_IR_DIRECT_CONV 1
#else
#define GRAPH_IR_DIRECT_CONV 0
#endif

#include "graph_ir/cc/depthwise.h"
#include "graph_ir/cc/worker_pool.h"

namespace graph_ir_cc {
namespace direct_conv {

using depthwise::Axis;

// x [n, rows.in, cols.in, in], y [n, rows.out, cols.out, out], the filter's taps in rows.taps x cols.taps.
struct Geometry {
  int64_t n = 0, in = 0, out = 0;
  Axis rows, cols;
};

inline bool supported() {
#if GRAPH_IR_DIRECT_CONV
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

// Vectors of 16 outputs a block holds (V) and the positions it computes at once (P): V * P sums in registers.
inline int vectors_for(int64_t out) { return out >= 64 ? 4 : static_cast<int>((out + 15) / 16); }

// The filter packed as [block][kh][kw][in][16 * V]. filter is [kh, kw, in, out]; flipped: it is [kh, kw, out, in]
// and read flipped in both taps, as the transposed convolution (the input gradient) reads the forward filter.
inline std::vector<float> pack(const float* filter, const Geometry& g, int V, bool flipped) {
  const int64_t kh = g.rows.taps, kw = g.cols.taps, lanes = 16 * V, blocks = (g.out + lanes - 1) / lanes;
  std::vector<float> packed(static_cast<size_t>(blocks * kh * kw * g.in * lanes), 0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t count = std::min(lanes, g.out - b * lanes);  // the block's outputs that exist
    for (int64_t i = 0; i < kh; ++i) {
      for (int64_t j = 0; j < kw; ++j) {
        float* dst = packed.data() + ((b * kh + i) * kw + j) * g.in * lanes;
        if (!flipped) {  // rows of `count` outputs, as they lie
          const float* src = filter + ((i * kw + j) * g.in) * g.out + b * lanes;
          for (int64_t c = 0; c < g.in; ++c) std::memcpy(dst + c * lanes, src + c * g.out, count * sizeof(float));
        } else {  // [out][in] of the flipped tap: each output's inputs read in a row
          const float* src = filter + ((kh - 1 - i) * kw + (kw - 1 - j)) * g.out * g.in + b * lanes * g.in;
          for (int64_t l = 0; l < count; ++l)
            for (int64_t c = 0; c < g.in; ++c) dst[c * lanes + l] = src[l * g.in + c];
        }
      }
    }
  }
  return packed;
}

#if GRAPH_IR_DIRECT_CONV

// Where output position k (of n * rows.out * cols.out, in NHW order) reads: the offset in x of its tap (0, 0)
// (negative or past the end when that tap lies in the padding: only valid taps' offsets are dereferenced) and its
// valid taps [ilo, ihi) x [jlo, jhi).
struct Reads {
  int64_t first, ilo, ihi, jlo, jhi;
};

inline Reads reads_of(const Geometry& g, int64_t k) {
  const int64_t col = k % g.cols.out, r = (k / g.cols.out) % g.rows.out, n = k / (g.cols.out * g.rows.out);
  Reads at;
  g.rows.taps_of_output(r, at.ilo, at.ihi);
  g.cols.taps_of_output(col, at.jlo, at.jhi);
  at.first = ((n * g.rows.in + r * g.rows.stride - g.rows.pad) * g.cols.in + col * g.cols.stride - g.cols.pad) * g.in;
  return at;
}

// Outputs k .. k + P - 1 (consecutive in NHW order, across rows and images) for the block of 16 * V channels whose
// packed filter is `packed`, written to y (the first output's channels of this block); valid: how many of the
// block's 16 * V channels exist. The taps run over the union of the P outputs' valid taps; an output reads `zeros`
// (in zero values) for a tap it does not have, which adds nothing as long as the filter is finite (the caller
// passes P = 1 otherwise, so that each output runs over its own taps only).
template <int P, int V>
__attribute__((target("avx512f"))) inline void block(const float* x, const Geometry& g, int64_t k,
                                                     const float* packed, const float* zeros, float* y,
                                                     int64_t valid) {
  Reads at[P];
  int64_t ilo = g.rows.taps, ihi = 0, jlo = g.cols.taps, jhi = 0;
  for (int p = 0; p < P; ++p) {
    at[p] = reads_of(g, k + p);
    if (at[p].ilo < at[p].ihi && at[p].jlo < at[p].jhi) {
      ilo = std::min(ilo, at[p].ilo), ihi = std::max(ihi, at[p].ihi);
      jlo = std::min(jlo, at[p].jlo), jhi = std::max(jhi, at[p].jhi);
    }
  }
  __m512 acc[P][V];
  for (int p = 0; p < P; ++p)
    for (int v = 0; v < V; ++v) acc[p][v] = _mm512_setzero_ps();
  const int64_t in = g.in, row_step = g.rows.dilation * g.cols.in * in, col_step = g.cols.dilation * in;
  for (int64_t i = ilo; i < ihi; ++i) {
    for (int64_t j = jlo; j < jhi; ++j) {
      const float* xr[P];
      for (int p = 0; p < P; ++p) {
        const bool has = i >= at[p].ilo && i < at[p].ihi && j >= at[p].jlo && j < at[p].jhi;
        xr[p] = has ? x + (at[p].first + i * row_step + j * col_step) : zeros;
      }
      const float* fr = packed + (i * g.cols.taps + j) * in * 16 * V;
      for (int64_t c = 0; c < in; ++c) {
        __m512 f[V];
        for (int v = 0; v < V; ++v) f[v] = _mm512_loadu_ps(fr + c * 16 * V + 16 * v);
        for (int p = 0; p < P; ++p) {
          const __m512 value = _mm512_set1_ps(xr[p][c]);
          for (int v = 0; v < V; ++v) acc[p][v] = _mm512_fmadd_ps(value, f[v], acc[p][v]);
        }
      }
    }
  }
  for (int p = 0; p < P; ++p) {
    for (int v = 0; v < V; ++v) {
      const int64_t lanes = std::min<int64_t>(16, valid - 16 * v);
      if (lanes >= 16) {
        _mm512_storeu_ps(y + p * g.out + 16 * v, acc[p][v]);
      } else if (lanes > 0) {
        _mm512_mask_storeu_ps(y + p * g.out + 16 * v, static_cast<__mmask16>((1u << lanes) - 1), acc[p][v]);
      }
    }
  }
}

// The most outputs a block computes for V vectors of sums: P * V + V of the 32 registers.
template <int V>
constexpr int widest() {
  return V == 4 ? 6 : V == 3 ? 8 : 12;
}

// Outputs [begin, end) of channel block b: in blocks of widest<V>() (of one output each without a finite filter).
template <int V>
__attribute__((target("avx512f"))) void outputs(const float* x, const Geometry& g, const float* packed,
                                                const float* zeros, float* y, int64_t b, int64_t begin, int64_t end,
                                                bool finite) {
  constexpr int P = widest<V>();
  const int64_t lanes = 16 * V, valid = std::min<int64_t>(lanes, g.out - b * lanes);
  const float* block_filter = packed + b * g.rows.taps * g.cols.taps * g.in * lanes;
  int64_t k = begin;
  if (finite) {
    for (; k + P <= end; k += P) block<P, V>(x, g, k, block_filter, zeros, y + k * g.out + b * lanes, valid);
  }
  for (; k < end; ++k) block<1, V>(x, g, k, block_filter, zeros, y + k * g.out + b * lanes, valid);
}

#endif  // GRAPH_IR_DIRECT_CONV

// y = the convolution of x by the packed filter (pack(filter, g, vectors_for(g.out), flipped)), over `threads`
// threads. finite: the filter holds no NaN or inf (outputs may then share taps in blocks). The outputs go in fixed
// runs of blocks per channel block, claimed in order (a channel block's filter stays in cache): which thread runs a
// run never changes what it computes.
inline void forward(WorkerPool& pool, const Geometry& g, const float* x, const float* packed, float* y, bool finite,
                    int threads) {
#if GRAPH_IR_DIRECT_CONV
  const int V = vectors_for(g.out);
  const int64_t positions = g.n * g.rows.out * g.cols.out, blocks = (g.out + 16 * V - 1) / (16 * V);
  constexpr int64_t kRun = 96;  // outputs a piece computes: a multiple of every widest<V>()
  const int64_t runs = (positions + kRun - 1) / kRun;
  const double work = static_cast<double>(positions) * g.rows.taps * g.cols.taps * g.in * g.out;
  const std::vector<float> zeros(static_cast<size_t>(g.in), 0.0f);
  depthwise::run_pieces(pool, runs * blocks, threads, work, 8, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / runs, first = (item % runs) * kRun, last = std::min(positions, first + kRun);
      switch (V) {
        case 1: outputs<1>(x, g, packed, zeros.data(), y, b, first, last, finite); break;
        case 2: outputs<2>(x, g, packed, zeros.data(), y, b, first, last, finite); break;
        case 3: outputs<3>(x, g, packed, zeros.data(), y, b, first, last, finite); break;
        default: outputs<4>(x, g, packed, zeros.data(), y, b, first, last, finite); break;
      }
    }
  });
#else
  (void)pool, (void)g, (void)x, (void)packed, (void)y, (void)finite, (void)threads;
#endif
}

}  // namespace direct_conv
}  // namespace graph_ir_cc
