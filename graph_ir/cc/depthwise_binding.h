// graph_ir._binding's depthwise_forward, depthwise_backprop_input and depthwise_backprop_filter (graph_ir/cc/
// depthwise.h), for graph_ir/executors/depthwise.py. Nothing from Python is trusted: every buffer is 4-D,
// C-contiguous, native float32 (the filter gradient's written one float64), writable where written, disjoint from
// the ones read; strides and dilations >= 1, pads >= 0, all below 2^31 as every dim; and the output sizes are the
// ones the window arithmetic gives, so no position computed in depthwise.h leaves its buffer. Anything else raises
// ValueError (TypeError for a wrong format) before anything is written. The GIL is released while computing.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "graph_ir/cc/depthwise.h"
#include "graph_ir/cc/worker_pool.h"

namespace graph_ir_cc {
namespace depthwise {

namespace py = pybind11;

constexpr int64_t kLimit = int64_t{1} << 31;

struct Buffer {
  py::buffer_info info;
  const char* name;
  int64_t bytes = 0;
  const char* begin() const { return static_cast<const char*>(info.ptr); }
};

// buffer as a checked 4-D C-contiguous array of float32 (wide: float64) in native byte order.
inline Buffer checked(const py::buffer& buffer, const char* name, bool wide, bool writable) {
  Buffer b{py::buffer_info(), name};
  try {
    b.info = buffer.request(writable);
  } catch (const py::error_already_set&) {
    throw py::value_error(std::string(name) + (writable ? " is not a writable buffer" : " is not a buffer"));
  }
  const std::string& f = b.info.format;
  const char code = wide ? 'd' : 'f';
  const bool native = f.size() == 1 ? f[0] == code : f.size() == 2 && (f[0] == '=' || f[0] == '@' || f[0] == '<');
  if (!native || f.back() != code || b.info.itemsize != (wide ? 8 : 4)) {
    throw py::type_error(std::string(name) + " has buffer format '" + f + "'; expected " +
                         (wide ? "float64" : "float32") + " in native byte order");
  }
  if (b.info.ndim != 4) {
    throw py::value_error(std::string(name) + " must be 4-D, got " + std::to_string(b.info.ndim) + " dims");
  }
  int64_t stride = b.info.itemsize;
  for (int d = 3; d >= 0; --d) {
    const int64_t extent = b.info.shape[d];
    if (extent < 0 || extent >= kLimit) throw py::value_error(std::string(name) + " has a dim of 2^31 or more");
    if (extent > 1 && b.info.strides[d] != stride) throw py::value_error(std::string(name) + " must be C-contiguous");
    stride *= extent;
  }
  b.bytes = stride;
  return b;
}

// Strides and dilations (h, w) in [1, 2^31), pads (top, bottom, left, right) in [0, 2^31); `op` names the caller.
inline void check_window(const char* op, const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
                         const std::vector<int64_t>& pads) {
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4) {
    throw py::value_error(std::string(op) + ": strides and dilations need 2 values (h, w), pads 4 (top, bottom, "
                          "left, right)");
  }
  for (int k = 0; k < 2; ++k) {
    if (strides[k] < 1 || strides[k] >= kLimit) {
      throw py::value_error(std::string(op) + ": strides must be in [1, 2^31)");
    }
    if (dilations[k] < 1 || dilations[k] >= kLimit) {
      throw py::value_error(std::string(op) + ": dilations must be in [1, 2^31)");
    }
  }
  for (int64_t p : pads) {
    if (p < 0 || p >= kLimit) throw py::value_error(std::string(op) + ": pads must be in [0, 2^31)");
  }
}

// rows and cols of x [N, H, W, .] by a filter of taps [kh, kw, ..] into y [N, Ho, Wo, .] (check_window passed),
// prepared; y's Ho and Wo must be what the window arithmetic gives.
inline void window_axes(const char* op, const Buffer& x, const Buffer& f, const Buffer& y,
                        const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
                        const std::vector<int64_t>& pads, Axis& rows, Axis& cols) {
  Axis* axes[2] = {&rows, &cols};
  for (int k = 0; k < 2; ++k) {
    Axis& a = *axes[k];
    a.in = x.info.shape[1 + k];
    a.out = y.info.shape[1 + k];
    a.taps = f.info.shape[k];
    a.stride = strides[k];
    a.dilation = dilations[k];
    a.pad = pads[2 * k];
    const int64_t padded = a.in + pads[2 * k] + pads[2 * k + 1], span = (a.taps - 1) * a.dilation + 1;
    const int64_t expected = padded >= span ? (padded - span) / a.stride + 1 : -1;
    if (a.out != expected) {
      throw py::value_error(std::string(op) + ": " + y.name + " has " + std::to_string(a.out) +
                            (k == 0 ? " rows" : " columns") + " but the window gives " + std::to_string(expected));
    }
    a.prepare();
  }
}

// The geometry of x [N, H, W, C] by filter [kh, kw, C, M] into y [N, Ho, Wo, C * M], checked.
inline Geometry geometry(const Buffer& x, const Buffer& f, const Buffer& y, const std::vector<int64_t>& strides,
                         const std::vector<int64_t>& dilations, const std::vector<int64_t>& pads) {
  check_window("depthwise", strides, dilations, pads);
  const auto &xs = x.info.shape, &fs = f.info.shape, &ys = y.info.shape;
  if (fs[2] != xs[3] || ys[0] != xs[0] || ys[3] != fs[2] * fs[3] || fs[0] < 1 || fs[1] < 1) {
    throw py::value_error(std::string("depthwise: ") + x.name + ", " + f.name + " and " + y.name +
                          " must be [N, H, W, C], [kh, kw, C, M] (kh, kw >= 1) and [N, Ho, Wo, C * M]");
  }
  Geometry g;
  g.n = xs[0];
  g.channels = xs[3];
  g.multiplier = fs[3];
  window_axes("depthwise", x, f, y, strides, dilations, pads, g.rows, g.cols);
  return g;
}

inline void check_disjoint(const Buffer& written, const Buffer& a, const Buffer& b) {
  for (const Buffer* r : {&a, &b}) {
    if (written.bytes > 0 && r->bytes > 0 && written.begin() < r->begin() + r->bytes &&
        r->begin() < written.begin() + written.bytes) {
      throw py::value_error(std::string(written.name) + " and " + r->name + " share memory");
    }
  }
}

// kind 0: y = forward(x, filter); 1: input_grad = backprop_input(filter, out_backprop); 2: filter_grad (float64) =
// backprop_filter(input, out_backprop). `a`, `b` the two read buffers in that order, `out` the written one.
inline void run(int kind, const py::buffer& a_b, const py::buffer& b_b, const py::buffer& out_b,
                const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
                const std::vector<int64_t>& pads, int threads) {
  static const char* names[3][3] = {{"x", "filter", "y"}, {"filter", "out_backprop", "input_grad"},
                                    {"input", "out_backprop", "filter_grad"}};
  const Buffer a = checked(a_b, names[kind][0], false, false), b = checked(b_b, names[kind][1], false, false);
  const Buffer out = checked(out_b, names[kind][2], kind == 2, true);
  // (x, filter, y) in the window arithmetic's roles
  const Geometry g = kind == 0 ? geometry(a, b, out, strides, dilations, pads)
                     : kind == 1 ? geometry(out, a, b, strides, dilations, pads)
                                 : geometry(a, out, b, strides, dilations, pads);
  check_disjoint(out, a, b);
  const float* pa = static_cast<const float*>(a.info.ptr);
  const float* pb = static_cast<const float*>(b.info.ptr);
  WorkerPool& pool = WorkerPool::instance();
  py::gil_scoped_release release;
  if (kind == 0) return forward(pool, g, pa, pb, static_cast<float*>(out.info.ptr), threads);
  if (kind == 1) return backprop_input(pool, g, pa, pb, static_cast<float*>(out.info.ptr), threads);
  backprop_filter(pool, g, pa, pb, static_cast<double*>(out.info.ptr), threads);
}

inline void bind(py::module_& module) {
  static const char* names[3] = {"depthwise_forward", "depthwise_backprop_input", "depthwise_backprop_filter"};
  static const char* args[3][3] = {{"x", "filter", "y"}, {"filter", "out_backprop", "input_grad"},
                                   {"input", "out_backprop", "filter_grad"}};
  for (int kind = 0; kind < 3; ++kind) {
    module.def(
        names[kind],
        [kind](const py::buffer& a, const py::buffer& b, const py::buffer& out, const std::vector<int64_t>& strides,
               const std::vector<int64_t>& dilations, const std::vector<int64_t>& pads,
               int threads) { run(kind, a, b, out, strides, dilations, pads, threads); },
        py::arg(args[kind][0]), py::arg(args[kind][1]), py::arg(args[kind][2]), py::arg("strides"),
        py::arg("dilations"), py::arg("pads"), py::arg("threads"));
  }
}

}  // namespace depthwise
}  // namespace graph_ir_cc
