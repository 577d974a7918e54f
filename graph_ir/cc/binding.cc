// graph_ir._binding: the framework-free kernels (kernels/) bound to Python with pybind11, for graph_ir.kernels.
//
// Nothing from Python is trusted: each buffer's format, item size, element count, C-contiguity and writability are
// checked against the named dtype here, and no written buffer may overlap another, before anything is written.
// The element count comes from the buffers themselves. The buffers stay acquired (and their owners alive and
// unresizable) while the kernels run without the GIL.
//
// Numerics match the TF ops: the same kernels, ISA dispatch and sharding plan (kernels/sharding.h), with
// flush-to-zero/denormals-are-zero set for the call, as TensorFlow sets them on its threads. The blocks run on the
// calling thread and a persistent pool of blocked workers (graph_ir/cc/worker_pool.h). Also erf/erfc of float32 arrays
// for graph_ir.Session's Erf and Erfc executors (erf_float32), its depthwise convolutions
// (graph_ir/cc/depthwise_binding.h) and its direct convolutions (graph_ir/cc/direct_conv_binding.h).
#include <pybind11/pybind11.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/fused_ema_adam.h"
#include "kernels/isa.h"
#include "kernels/power_sign.h"
#include "kernels/sharding.h"
#include "graph_ir/cc/worker_pool.h"
#include "graph_ir/cc/depthwise_binding.h"
#include "graph_ir/cc/direct_conv_binding.h"
#include "graph_ir/cc/row_sums_binding.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#define OPTIM_HAVE_MXCSR 1
#else
#define OPTIM_HAVE_MXCSR 0
#endif

namespace py = pybind11;
using optim_kernels::bfloat16_t;
using optim_kernels::half_t;

namespace {

// Sets FTZ and DAZ (bits 15 and 6 of MXCSR) for the scope, as TensorFlow's executor does.
class FlushDenormals {
 public:
  FlushDenormals() {
#if OPTIM_HAVE_MXCSR
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ | 0x8040u);
#endif
  }
  ~FlushDenormals() {
#if OPTIM_HAVE_MXCSR
    _mm_setcsr(saved_);
#endif
  }

 private:
  unsigned saved_ = 0;
};

// Runs fn over [0, n) in the blocks of the one sharding plan, on the calling thread plus the pool's workers, with
// FTZ/DAZ set as on TensorFlow's threads. `pool` is WorkerPool::instance(), taken while the GIL was held.
template <typename Fn>
void parallel_for(graph_ir_cc::WorkerPool& pool, int64_t n, int64_t bytes_per_element, Fn fn) {
  const int64_t threads = pool.workers() + 1;
  const int64_t min_block = optim_kernels::shard_min_block(n, bytes_per_element, threads);
  if (min_block == 0) {
    FlushDenormals ftz;
    fn(int64_t{0}, n);
    return;
  }
  const int64_t tasks = optim_kernels::shard_tasks(n, threads, min_block);
  std::atomic<int64_t> next{0};
  const std::function<void()> worker = [&] {
    FlushDenormals ftz;
    optim_kernels::run_claimed_blocks(next, n, tasks, min_block, fn);
  };
  pool.run(static_cast<int>(tasks - 1), worker);
}

// The buffer format codes a dtype accepts (native byte order only) and its item size. bfloat16 arrives as the
// uint16 view graph_ir.kernels makes (NumPy cannot export ml_dtypes' format).
struct DtypeInfo {
  const char* name;
  ssize_t itemsize;
  std::vector<std::string> formats;
};

const DtypeInfo& dtype_info(const std::string& name) {
  static const std::vector<DtypeInfo> table = {
      {"float32", 4, {"f", "=f", "@f", "<f"}},
      {"float16", 2, {"e", "=e", "@e", "<e"}},
      {"bfloat16", 2, {"H", "=H", "@H", "<H"}},
      {"float64", 8, {"d", "=d", "@d", "<d"}},
  };
  for (const auto& d : table) {
    if (name == d.name) return d;
  }
  throw py::value_error("unsupported dtype '" + name + "'; expected float32, float16, bfloat16 or float64");
}

// One checked, acquired buffer.
struct Array {
  py::buffer_info info;
  int64_t size = 0;
  const char* name = "";

  char* begin() const { return static_cast<char*>(info.ptr); }
  char* end() const { return begin() + size * info.itemsize; }
};

Array acquire(const py::buffer& buffer, const char* name, const DtypeInfo& dtype, bool writable) {
  Array a;
  a.name = name;
  try {
    a.info = buffer.request(writable);
  } catch (const py::error_already_set&) {
    throw py::value_error(std::string(name) + (writable ? " is updated in place but is not a writable buffer"
                                                        : " does not export a readable buffer"));
  }
  if (std::find(dtype.formats.begin(), dtype.formats.end(), a.info.format) == dtype.formats.end() ||
      a.info.itemsize != dtype.itemsize) {
    throw py::type_error(std::string(name) + " has buffer format '" + a.info.format + "' (item size " +
                         std::to_string(a.info.itemsize) + "); expected " + dtype.name +
                         " in native byte order (item size " + std::to_string(dtype.itemsize) + ")");
  }
  int64_t count = 1;
  ssize_t expected_stride = a.info.itemsize;
  for (ssize_t d = a.info.ndim - 1; d >= 0; --d) {
    const ssize_t extent = a.info.shape[d];
    if (extent < 0 || (extent > 0 && count > (int64_t{1} << 62) / extent)) {
      throw py::value_error(std::string(name) + " has an invalid shape");
    }
    if (extent > 1 && a.info.strides[d] != expected_stride) {
      throw py::value_error(std::string(name) + " must be C-contiguous");
    }
    expected_stride *= extent;
    count *= extent;
  }
  a.size = count;
  return a;
}

// Same element count everywhere; no written array overlaps any other array.
void check_together(const std::vector<Array*>& arrays, size_t written) {
  for (const Array* a : arrays) {
    if (a->size != arrays[0]->size) {
      throw py::value_error(std::string(a->name) + " has " + std::to_string(a->size) + " elements but " +
                            arrays[0]->name + " has " + std::to_string(arrays[0]->size) + "; they must match");
    }
  }
  for (size_t i = 0; i < written; ++i) {
    for (size_t j = 0; j < arrays.size(); ++j) {
      const Array& a = *arrays[i];
      const Array& b = *arrays[j];
      if (i != j && a.size > 0 && a.begin() < b.end() && b.begin() < a.end()) {
        throw py::value_error(std::string(a.name) + " and " + b.name +
                              " share memory; each updated array needs its own buffer");
      }
    }
  }
}

template <typename T>
T* ptr(const Array& a) {
  return static_cast<T*>(a.info.ptr);
}

template <typename T, typename C>
void power_sign_typed(const Array& var, const Array& m, const Array& grad, C lr, C logbase, C sign_decay, C beta) {
  const auto s = optim_kernels::make_power_sign_scalars<C>(lr, logbase, sign_decay, beta);
  T* v = ptr<T>(var);
  T* mm = ptr<T>(m);
  const T* g = ptr<T>(grad);
  graph_ir_cc::WorkerPool& pool = graph_ir_cc::WorkerPool::instance();
  py::gil_scoped_release release;
  parallel_for(pool, var.size, 5 * static_cast<int64_t>(sizeof(T)),
               [&](int64_t b, int64_t e) { optim_kernels::power_sign_update(v, mm, g, s, b, e); });
}

void power_sign(const std::string& dtype_name, const py::buffer& var_b, const py::buffer& m_b,
                const py::buffer& grad_b, double lr, double logbase, double sign_decay, double beta) {
  const DtypeInfo& dtype = dtype_info(dtype_name);
  Array var = acquire(var_b, "var", dtype, true);
  Array m = acquire(m_b, "m", dtype, true);
  Array grad = acquire(grad_b, "grad", dtype, false);
  check_together({&var, &m, &grad}, 2);
  if (dtype_name == "float64") return power_sign_typed<double, double>(var, m, grad, lr, logbase, sign_decay, beta);
  const float l = static_cast<float>(lr), lb = static_cast<float>(logbase), sd = static_cast<float>(sign_decay);
  const float b = static_cast<float>(beta);
  if (dtype_name == "float32") return power_sign_typed<float, float>(var, m, grad, l, lb, sd, b);
  if (dtype_name == "float16") return power_sign_typed<half_t, float>(var, m, grad, l, lb, sd, b);
  return power_sign_typed<bfloat16_t, float>(var, m, grad, l, lb, sd, b);
}

template <typename T>
void fused_typed(const std::vector<Array*>& a, const optim_kernels::FusedEmaAdamScalars& k) {
  const T* g = ptr<T>(*a[4]);
  T *w = ptr<T>(*a[0]), *mm = ptr<T>(*a[1]), *vv = ptr<T>(*a[2]), *ss = ptr<T>(*a[3]);
  graph_ir_cc::WorkerPool& pool = graph_ir_cc::WorkerPool::instance();
  py::gil_scoped_release release;
  parallel_for(pool, a[0]->size, 9 * static_cast<int64_t>(sizeof(T)),
               [&](int64_t b, int64_t e) { optim_kernels::fused_ema_adam_update(g, w, mm, vv, ss, k, b, e); });
}

void fused_ema_adam(const std::string& dtype_name, const py::buffer& grad_b, const py::buffer& var_b,
                    const py::buffer& m_b, const py::buffer& v_b, const py::buffer& s_b, int64_t step, float lr,
                    float ema_decay, float beta1, float beta2, float eps, int64_t mode, bool bias_correction,
                    float weight_decay) {
  const DtypeInfo& dtype = dtype_info(dtype_name);
  if (dtype_name == "float64") throw py::type_error("fused_ema_adam: float64 is not supported");
  Array var = acquire(var_b, "var", dtype, true);
  Array m = acquire(m_b, "m", dtype, true);
  Array v = acquire(v_b, "v", dtype, true);
  Array s = acquire(s_b, "s", dtype, true);
  Array grad = acquire(grad_b, "grad", dtype, false);
  const std::vector<Array*> arrays = {&var, &m, &v, &s, &grad};
  check_together(arrays, 4);
  const auto k = optim_kernels::make_fused_ema_adam_scalars(lr, ema_decay, beta1, beta2, eps, mode, bias_correction,
                                                            weight_decay, step);
  if (dtype_name == "float32") return fused_typed<float>(arrays, k);
  if (dtype_name == "float16") return fused_typed<half_t>(arrays, k);
  return fused_typed<bfloat16_t>(arrays, k);
}

// The elements an erf pass hands to one thread at least (about 0.1 ms of std::erf): fewer run on the caller alone.
constexpr int64_t kErfMinPart = 16384;

template <typename Out>
void erf_parts(graph_ir_cc::WorkerPool& pool, const float* x, Out* out, int64_t n, bool complement, int threads) {
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>({threads, pool.workers() + 1, n / kErfMinPart}));
  std::atomic<int64_t> next{0};
  const std::function<void()> task = [&] {
    for (int64_t p = next++; p < parts; p = next++) {
      const int64_t begin = n * p / parts, end = n * (p + 1) / parts;
      for (int64_t i = begin; i < end; ++i) {
        const double v = static_cast<double>(x[i]);
        out[i] = static_cast<Out>(complement ? std::erfc(v) : std::erf(v));
      }
    }
  };
  pool.run(static_cast<int>(parts - 1), task);
}

// erf (complement false) or erfc (true) of float32 x into out (float32, or float64 for a caller that rounds once to
// a 16-bit float): each element evaluated in double (std::erf / std::erfc) and rounded once to out's dtype, so
// almost always the correctly rounded value. Elementwise: the result does not depend on `threads` (at most that many
// threads work). No FTZ/DAZ: tiny values keep their subnormal results, as NumPy computes them.
void erf_float32(const py::buffer& x_b, const py::buffer& out_b, bool complement, int threads) {
  Array x = acquire(x_b, "x", dtype_info("float32"), false);
  bool wide = false;  // a float64 out; anything else is checked as float32 (acquire names what it got)
  try {
    const std::string format = out_b.request().format;
    wide = !format.empty() && format.back() == 'd';
  } catch (const py::error_already_set&) {
  }
  Array out = acquire(out_b, "out", dtype_info(wide ? "float64" : "float32"), true);
  check_together({&out, &x}, 1);
  graph_ir_cc::WorkerPool& pool = graph_ir_cc::WorkerPool::instance();
  py::gil_scoped_release release;
  if (wide) return erf_parts(pool, ptr<float>(x), ptr<double>(out), x.size, complement, threads);
  erf_parts(pool, ptr<float>(x), ptr<float>(out), x.size, complement, threads);
}

}  // namespace

PYBIND11_MODULE(_binding, module) {
  module.doc() = "tf_plugin's fused kernels on buffers (use graph_ir.kernels, which also checks the values)";
  module.def("power_sign", &power_sign, py::arg("dtype"), py::arg("var"), py::arg("m"), py::arg("grad"),
             py::arg("lr"), py::arg("logbase"), py::arg("sign_decay"), py::arg("beta"));
  module.def("fused_ema_adam", &fused_ema_adam, py::arg("dtype"), py::arg("grad"), py::arg("var"), py::arg("m"),
             py::arg("v"), py::arg("s"), py::arg("step"), py::arg("lr"), py::arg("ema_decay"), py::arg("beta1"),
             py::arg("beta2"), py::arg("eps"), py::arg("mode"), py::arg("bias_correction"),
             py::arg("weight_decay"));
  module.def("erf_float32", &erf_float32, py::arg("x"), py::arg("out"), py::arg("complement"), py::arg("threads"));
  graph_ir_cc::depthwise::bind(module);
  graph_ir_cc::direct_conv::bind(module);
  graph_ir_cc::row_sums::bind(module);
  module.def("isa", [] { return std::string(optim_kernels::isa_name(optim_kernels::active_isa())); });
}
