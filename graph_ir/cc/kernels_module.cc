// graph_ir._kernels: the framework-free kernels (kernels/) bound to Python with pybind11. graph_ir/kernels.py
// validates the arrays and arguments and calls these with raw buffers; nothing here allocates or copies.
//
// Numerics match the TF ops: the same kernels and ISA dispatch, and flush-to-zero/denormals-are-zero set for the
// call, as TensorFlow sets them on its threads. Large updates are split over std::threads in 64-aligned blocks.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "kernels/fused_ema_adam.h"
#include "kernels/isa.h"
#include "kernels/power_sign.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#define TFP_HAVE_MXCSR 1
#else
#define TFP_HAVE_MXCSR 0
#endif

namespace py = pybind11;
using tfp_kernels::bfloat16_t;
using tfp_kernels::half_t;

namespace {

// Sets FTZ and DAZ (bits 15 and 6 of MXCSR) for the scope, as TensorFlow's executor does.
class FlushDenormals {
 public:
  FlushDenormals() {
#if TFP_HAVE_MXCSR
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ | 0x8040u);
#endif
  }
  ~FlushDenormals() {
#if TFP_HAVE_MXCSR
    _mm_setcsr(saved_);
#endif
  }

 private:
  unsigned saved_ = 0;
};

// Same cost model as the TF kernels (tf_plugin/cc/kernels/sharding.h): inline below 256 KiB of traffic.
template <typename Fn>
void parallel_for(int64_t n, int64_t bytes_per_element, Fn fn) {
  const int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  if (threads == 1 || n * bytes_per_element <= 256 * 1024) {
    FlushDenormals ftz;
    fn(int64_t{0}, n);
    return;
  }
  int64_t block = (n + threads - 1) / threads;
  block = (block + 63) / 64 * 64;
  std::vector<std::thread> pool;
  for (int64_t begin = block; begin < n; begin += block) {
    const int64_t end = std::min(n, begin + block);
    pool.emplace_back([=] {
      FlushDenormals ftz;
      fn(begin, end);
    });
  }
  {
    FlushDenormals ftz;
    fn(int64_t{0}, std::min(n, block));
  }
  for (auto& t : pool) t.join();
}

template <typename T>
T* data(const py::buffer& b) {
  return static_cast<T*>(b.request().ptr);
}

template <typename T, typename C>
void power_sign_typed(py::buffer var, py::buffer m, py::buffer grad, int64_t n, C lr, C logbase, C sign_decay,
                      C beta) {
  const auto s = tfp_kernels::make_power_sign_scalars<C>(lr, logbase, sign_decay, beta);
  T* v = data<T>(var);
  T* mm = data<T>(m);
  const T* g = data<T>(grad);
  py::gil_scoped_release release;
  parallel_for(n, 5 * static_cast<int64_t>(sizeof(T)),
               [&](int64_t b, int64_t e) { tfp_kernels::power_sign_update(v, mm, g, s, b, e); });
}

void power_sign(const std::string& dtype, py::buffer var, py::buffer m, py::buffer grad, int64_t n, double lr,
                double logbase, double sign_decay, double beta) {
  if (dtype == "float64") return power_sign_typed<double, double>(var, m, grad, n, lr, logbase, sign_decay, beta);
  const float l = static_cast<float>(lr), lb = static_cast<float>(logbase), sd = static_cast<float>(sign_decay);
  const float b = static_cast<float>(beta);
  if (dtype == "float32") return power_sign_typed<float, float>(var, m, grad, n, l, lb, sd, b);
  if (dtype == "float16") return power_sign_typed<half_t, float>(var, m, grad, n, l, lb, sd, b);
  if (dtype == "bfloat16") return power_sign_typed<bfloat16_t, float>(var, m, grad, n, l, lb, sd, b);
  throw py::value_error("power_sign: unsupported dtype " + dtype);
}

template <typename T>
void fused_typed(py::buffer grad, py::buffer var, py::buffer m, py::buffer v, py::buffer s, int64_t n,
                 const tfp_kernels::FusedEmaAdamScalars& k) {
  const T* g = data<T>(grad);
  T *w = data<T>(var), *mm = data<T>(m), *vv = data<T>(v), *ss = data<T>(s);
  py::gil_scoped_release release;
  parallel_for(n, 9 * static_cast<int64_t>(sizeof(T)),
               [&](int64_t b, int64_t e) { tfp_kernels::fused_ema_adam_update(g, w, mm, vv, ss, k, b, e); });
}

void fused_ema_adam(const std::string& dtype, py::buffer grad, py::buffer var, py::buffer m, py::buffer v,
                    py::buffer s, int64_t n, int64_t step, float lr, float ema_decay, float beta1, float beta2,
                    float eps, int64_t mode, bool bias_correction, float weight_decay) {
  const auto k = tfp_kernels::make_fused_ema_adam_scalars(lr, ema_decay, beta1, beta2, eps, mode, bias_correction,
                                                          weight_decay, step);
  if (dtype == "float32") return fused_typed<float>(grad, var, m, v, s, n, k);
  if (dtype == "float16") return fused_typed<half_t>(grad, var, m, v, s, n, k);
  if (dtype == "bfloat16") return fused_typed<bfloat16_t>(grad, var, m, v, s, n, k);
  throw py::value_error("fused_ema_adam: unsupported dtype " + dtype);
}

}  // namespace

PYBIND11_MODULE(_kernels, module) {
  module.doc() = "tf_plugin's fused kernels on raw buffers (use graph_ir.kernels, which validates the arguments)";
  module.def("power_sign", &power_sign);
  module.def("fused_ema_adam", &fused_ema_adam);
  module.def("isa", [] { return std::string(tfp_kernels::isa_name(tfp_kernels::active_isa())); });
}
