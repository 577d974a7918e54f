// FusedEmaAdam's per-call scalars: plain data, shared by the portable loop and the SIMD paths.
#pragma once

namespace optim_kernels {

struct FusedEmaAdamScalars {
  float lr;
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float inv_c1, inv_c2;  // 1 / bias corrections, as the Ascend kernel multiplies by them
  float eps;
  float weight_decay;
  float ema_decay, one_minus_ema_decay;
  bool decoupled;  // mode 1 (AdamW); mode 0 adds weight_decay * var to the gradient (L2)
};

}  // namespace optim_kernels
