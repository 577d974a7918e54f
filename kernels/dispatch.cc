// Chooses the instruction-set path once per process and routes the kernels' entry points to it. Compiled for
// baseline x86-64 (or any other architecture, where only the portable path exists).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/fused_ema_adam.h"
#include "kernels/isa.h"
#include "kernels/power_sign.h"
#include "kernels/simd/kernel_table.h"

#if defined(__x86_64__) || defined(_M_X64)
#define OPTIM_HAVE_X86_PATHS 1
#else
#define OPTIM_HAVE_X86_PATHS 0
#endif

namespace optim_kernels {
namespace {

Isa requested_isa(Isa best) {
  const char* env = std::getenv("TF_PLUGIN_ISA");
  if (env == nullptr || *env == '\0') return best;
  Isa wanted;
  if (std::strcmp(env, "portable") == 0) {
    wanted = Isa::kPortable;
  } else if (std::strcmp(env, "avx2") == 0) {
    wanted = Isa::kAvx2;
  } else if (std::strcmp(env, "avx512") == 0) {
    wanted = Isa::kAvx512;
  } else if (std::strcmp(env, "avx512bf16") == 0) {
    wanted = Isa::kAvx512Bf16;
  } else {
    std::fprintf(stderr, "tf_plugin: TF_PLUGIN_ISA=%s is not one of portable, avx2, avx512, avx512bf16; using %s\n", env,
                 isa_name(best));
    return best;
  }
  // A path the CPU cannot run is capped to the best one it can.
  return static_cast<int>(wanted) <= static_cast<int>(best) ? wanted : best;
}

const KernelTable* table_for(Isa isa) {
#if OPTIM_HAVE_X86_PATHS
  if (isa == Isa::kAvx512Bf16) return &kAvx512Bf16Kernels;
  if (isa == Isa::kAvx512) return &kAvx512Kernels;
  if (isa == Isa::kAvx2) return &kAvx2Kernels;
#endif
  (void)isa;
  return nullptr;  // portable
}

const KernelTable* active_table() {
  static const KernelTable* const table = table_for(active_isa());
  return table;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512Bf16:
      return "avx512bf16";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    default:
      return "portable";
  }
}

Isa best_supported_isa() {
#if OPTIM_HAVE_X86_PATHS
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    if (__builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw")) {
      return Isa::kAvx512Bf16;
    }
    return Isa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    return Isa::kAvx2;
  }
#endif
  return Isa::kPortable;
}

Isa active_isa() {
  static const Isa isa = requested_isa(best_supported_isa());
  return isa;
}

void power_sign_update(float* var, float* m, const float* grad, const PowerSignScalars<float>& s, int64_t begin,
                       int64_t end) {
  if (const KernelTable* t = active_table()) return t->power_sign_f32(var, m, grad, s, begin, end);
  power_sign_range(var, m, grad, s, begin, end);
}

void power_sign_update(half_t* var, half_t* m, const half_t* grad, const PowerSignScalars<float>& s, int64_t begin,
                       int64_t end) {
  if (const KernelTable* t = active_table()) return t->power_sign_f16(var, m, grad, s, begin, end);
  power_sign_range(var, m, grad, s, begin, end);
}

void power_sign_update(bfloat16_t* var, bfloat16_t* m, const bfloat16_t* grad, const PowerSignScalars<float>& s,
                       int64_t begin, int64_t end) {
  if (const KernelTable* t = active_table()) return t->power_sign_bf16(var, m, grad, s, begin, end);
  power_sign_range(var, m, grad, s, begin, end);
}

void power_sign_update(double* var, double* m, const double* grad, const PowerSignScalars<double>& s, int64_t begin,
                       int64_t end) {
  power_sign_range(var, m, grad, s, begin, end);
}

void fused_ema_adam_update(const float* grad, float* var, float* m, float* v, float* s, const FusedEmaAdamScalars& k,
                           int64_t begin, int64_t end) {
  if (const KernelTable* t = active_table()) return t->fused_ema_adam_f32(grad, var, m, v, s, k, begin, end);
  fused_ema_adam_range(grad, var, m, v, s, k, begin, end);
}

void fused_ema_adam_update(const half_t* grad, half_t* var, half_t* m, half_t* v, half_t* s,
                           const FusedEmaAdamScalars& k, int64_t begin, int64_t end) {
  if (const KernelTable* t = active_table()) return t->fused_ema_adam_f16(grad, var, m, v, s, k, begin, end);
  fused_ema_adam_range(grad, var, m, v, s, k, begin, end);
}

void fused_ema_adam_update(const bfloat16_t* grad, bfloat16_t* var, bfloat16_t* m, bfloat16_t* v, bfloat16_t* s,
                           const FusedEmaAdamScalars& k, int64_t begin, int64_t end) {
  if (const KernelTable* t = active_table()) return t->fused_ema_adam_bf16(grad, var, m, v, s, k, begin, end);
  fused_ema_adam_range(grad, var, m, v, s, k, begin, end);
}

}  // namespace optim_kernels
