// The table of entry points one instruction-set path provides (kernels/simd/<isa>.cc), picked by kernels/dispatch.cc.
// Plain function pointers and data: nothing here is compiled with the path's instruction set.
#pragma once

#include <cstdint>

#include "kernels/float_types.h"
#include "kernels/fused_ema_adam_scalars.h"
#include "kernels/power_sign_scalars.h"

namespace optim_kernels {

template <typename T>
using PowerSignFn = void (*)(T* var, T* m, const T* grad, const PowerSignScalars<float>& s, int64_t begin,
                             int64_t end);
template <typename T>
using FusedEmaAdamFn = void (*)(const T* grad, T* var, T* m, T* v, T* s, const FusedEmaAdamScalars& k,
                                int64_t begin, int64_t end);

struct KernelTable {
  PowerSignFn<float> power_sign_f32;
  PowerSignFn<half_t> power_sign_f16;
  PowerSignFn<bfloat16_t> power_sign_bf16;
  FusedEmaAdamFn<float> fused_ema_adam_f32;
  FusedEmaAdamFn<half_t> fused_ema_adam_f16;
  FusedEmaAdamFn<bfloat16_t> fused_ema_adam_bf16;
};

// Defined only on x86-64 builds, each in its own translation unit.
extern const KernelTable kAvx2Kernels;
extern const KernelTable kAvx512Kernels;
extern const KernelTable kAvx512Bf16Kernels;

}  // namespace optim_kernels
