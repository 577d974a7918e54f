// graph_ir._binding's conv2d_direct and conv2d_direct_supported (graph_ir/cc/direct_conv.h), for
// graph_ir/executors/conv.py. Nothing from Python is trusted: every buffer is 4-D, C-contiguous, native float32, the
// output writable and disjoint from the inputs; strides and dilations >= 1, pads >= 0, all below 2^31 as every dim;
// the channels agree and the output sizes are the ones the window arithmetic gives, so no position computed in
// direct_conv.h leaves its buffer. Anything else raises ValueError (TypeError for a wrong format) before anything
// is written. The GIL is released while computing.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "graph_ir/cc/depthwise_binding.h"
#include "graph_ir/cc/direct_conv.h"
#include "graph_ir/cc/direct_conv_filter.h"
#include "graph_ir/cc/worker_pool.h"

namespace graph_ir_cc {
namespace direct_conv {

namespace py = pybind11;
using depthwise::Buffer;

// The geometry of x [N, H, W, C] by filter [kh, kw, C, O] (flipped: [kh, kw, O, C]) into y [N, Ho, Wo, O], checked.
inline Geometry geometry(const Buffer& x, const Buffer& f, const Buffer& y, const std::vector<int64_t>& strides,
                         const std::vector<int64_t>& dilations, const std::vector<int64_t>& pads, bool flipped) {
  depthwise::check_window("conv2d_direct", strides, dilations, pads);
  const auto &xs = x.info.shape, &fs = f.info.shape, &ys = y.info.shape;
  const int64_t f_in = flipped ? fs[3] : fs[2], f_out = flipped ? fs[2] : fs[3];
  if (f_in != xs[3] || f_out != ys[3] || ys[0] != xs[0] || fs[0] < 1 || fs[1] < 1) {
    throw py::value_error(std::string("conv2d_direct: x ") + "[" + std::to_string(xs[0]) + ", .., " +
                          std::to_string(xs[3]) + "], filter [" + std::to_string(fs[0]) + ", " +
                          std::to_string(fs[1]) + ", " + std::to_string(fs[2]) + ", " + std::to_string(fs[3]) +
                          "] and y [" + std::to_string(ys[0]) + ", .., " + std::to_string(ys[3]) + "] must be " +
                          (flipped ? "[N, H, W, C], [kh, kw, O, C] (kh, kw >= 1)" : "[N, H, W, C], [kh, kw, C, O] "
                                                                                     "(kh, kw >= 1)") +
                          " and [N, Ho, Wo, O]");
  }
  Geometry g;
  g.n = xs[0];
  g.in = xs[3];
  g.out = ys[3];
  depthwise::window_axes("conv2d_direct", x, f, y, strides, dilations, pads, g.rows, g.cols);
  return g;
}

inline void run(const py::buffer& x_b, const py::buffer& f_b, const py::buffer& y_b,
                const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
                const std::vector<int64_t>& pads, bool flipped, bool finite, int threads) {
  if (!supported()) throw py::value_error("conv2d_direct needs a CPU with AVX-512 (conv2d_direct_supported())");
  const Buffer x = depthwise::checked(x_b, "x", false, false), f = depthwise::checked(f_b, "filter", false, false);
  const Buffer y = depthwise::checked(y_b, "y", false, true);
  const Geometry g = geometry(x, f, y, strides, dilations, pads, flipped);
  depthwise::check_disjoint(y, x, f);
  float* py = static_cast<float*>(y.info.ptr);
  if (y.bytes == 0) return;
  if (g.in == 0) {  // sums of nothing
    std::fill(py, py + y.bytes / 4, 0.0f);
    return;
  }
  const float* px = static_cast<const float*>(x.info.ptr);
  const float* pf = static_cast<const float*>(f.info.ptr);
  WorkerPool& pool = WorkerPool::instance();
  py::gil_scoped_release release;
  const std::vector<float> packed = pack(pf, g, vectors_for(g.out), flipped);
  forward(pool, g, px, packed.data(), py, finite, threads);
}

inline void run_filter(const py::buffer& x_b, const py::buffer& dy_b, const py::buffer& df_b,
                       const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
                       const std::vector<int64_t>& pads, int threads) {
  if (!supported()) throw py::value_error("conv2d_direct_filter needs a CPU with AVX-512 (conv2d_direct_supported())");
  const Buffer x = depthwise::checked(x_b, "x", false, false), dy = depthwise::checked(dy_b, "out_backprop", false,
                                                                                          false);
  const Buffer df = depthwise::checked(df_b, "filter_grad", false, true);
  const Geometry g = geometry(x, df, dy, strides, dilations, pads, false);
  depthwise::check_disjoint(df, x, dy);
  float* pdf = static_cast<float*>(df.info.ptr);
  if (df.bytes == 0) return;
  const float* px = static_cast<const float*>(x.info.ptr);
  const float* pdy = static_cast<const float*>(dy.info.ptr);
  WorkerPool& pool = WorkerPool::instance();
  py::gil_scoped_release release;
  backprop_filter(pool, g, px, pdy, pdf, threads);
}

inline void bind(py::module_& module) {
  module.def("conv2d_direct_filter", &run_filter, py::arg("x"), py::arg("out_backprop"), py::arg("filter_grad"),
             py::arg("strides"), py::arg("dilations"), py::arg("pads"), py::arg("threads"),
             "filter_grad [kh, kw, C, O] = the filter gradient of x [N, H, W, C] and out_backprop [N, Ho, Wo, O], "
             "float32, padding contributing nothing");
  module.def("conv2d_direct_supported", &supported,
             "Whether conv2d_direct runs here (an x86-64 CPU with AVX-512)");
  module.def("conv2d_direct", &run, py::arg("x"), py::arg("filter"), py::arg("y"), py::arg("strides"),
             py::arg("dilations"), py::arg("pads"), py::arg("flipped"), py::arg("finite"), py::arg("threads"),
             "y [N, Ho, Wo, O] = x [N, H, W, C] convolved by filter [kh, kw, C, O] (flipped: [kh, kw, O, C] read "
             "flipped in both taps), float32, padding contributing nothing; finite: the filter holds no NaN or inf "
             "(a wrong True may make NaN where a padded tap meets a NaN or inf filter value)");
}

}  // namespace direct_conv
}  // namespace graph_ir_cc
