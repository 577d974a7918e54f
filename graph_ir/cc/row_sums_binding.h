// graph_ir._binding's column_sums_f64 (graph_ir/cc/row_sums.h), for graph_ir/executors/reduce.py. Nothing from Python
// is trusted: x is a 2-D C-contiguous native float32 buffer, out a 1-D C-contiguous writable native float64 buffer of
// x's column count, not overlapping x; anything else raises TypeError (a wrong format) or ValueError before anything
// is written. The GIL is released while summing.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "graph_ir/cc/row_sums.h"
#include "graph_ir/cc/worker_pool.h"

namespace graph_ir_cc {
namespace row_sums {

namespace py = pybind11;

// buffer's info, checked: `ndim` dims, C-contiguous, native `code` ('f' or 'd') of `itemsize` bytes.
inline py::buffer_info checked(const py::buffer& buffer, const char* name, int ndim, char code, ssize_t itemsize,
                               bool writable) {
  py::buffer_info info;
  try {
    info = buffer.request(writable);
  } catch (const py::error_already_set&) {
    throw py::value_error(std::string(name) + (writable ? " is not a writable buffer" : " is not a buffer"));
  }
  const std::string& f = info.format;
  const bool native = f.size() == 1 ? f[0] == code : f.size() == 2 && (f[0] == '=' || f[0] == '@' || f[0] == '<');
  if (!native || f.back() != code || info.itemsize != itemsize) {
    throw py::type_error(std::string(name) + " has buffer format '" + f + "'; expected " +
                         (code == 'f' ? "float32" : "float64") + " in native byte order");
  }
  if (info.ndim != ndim) {
    throw py::value_error(std::string(name) + " must be " + std::to_string(ndim) + "-D, got " +
                          std::to_string(info.ndim) + " dims");
  }
  ssize_t stride = itemsize;
  for (int d = ndim - 1; d >= 0; --d) {
    if (info.shape[d] > 1 && info.strides[d] != stride) {
      throw py::value_error(std::string(name) + " must be C-contiguous");
    }
    stride *= info.shape[d];
  }
  return info;
}

inline void column_sums(const py::buffer& x_b, const py::buffer& out_b, int threads) {
  py::buffer_info x = checked(x_b, "x", 2, 'f', 4, false);
  py::buffer_info out = checked(out_b, "out", 1, 'd', 8, true);
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (out.shape[0] != cols) {
    throw py::value_error("out has " + std::to_string(out.shape[0]) + " elements; expected x's " +
                          std::to_string(cols) + " columns");
  }
  const char *xb = static_cast<const char*>(x.ptr), *ob = static_cast<const char*>(out.ptr);
  if (cols > 0 && rows > 0 && ob < xb + rows * cols * 4 && xb < ob + cols * 8) {
    throw py::value_error("out overlaps x");
  }
  if (threads < 1) throw py::value_error("threads must be >= 1, got " + std::to_string(threads));
  WorkerPool& pool = WorkerPool::instance();
  py::gil_scoped_release release;
  column_sums_f64(pool, static_cast<const float*>(x.ptr), rows, cols, static_cast<double*>(out.ptr), threads);
}

inline void bind(py::module_& module) {
  module.def("column_sums_f64", &column_sums, py::arg("x"), py::arg("out"), py::arg("threads"),
             "out[c] = sum over r of x[r, c] for float32 x [rows, cols], accumulated in float64 in row blocks whose "
             "sums add in block order (the same result for any thread count).");
}

}  // namespace row_sums
}  // namespace graph_ir_cc
