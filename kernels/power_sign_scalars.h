// PowerSign's per-call scalars: plain data, shared by the portable loop and the SIMD paths.
#pragma once

namespace optim_kernels {

template <typename C>
struct PowerSignScalars {
  C lr;
  C beta;
  C one_minus_beta;
  C scale_neg;   // exp(logbase * sign_decay * -1)
  C scale_zero;  // exp(logbase * sign_decay * 0): 1 unless the product is Inf or NaN
  C scale_pos;   // exp(logbase * sign_decay * +1)
  // All three scales finite (the usual case): then a zero grad gives a zero step whichever scale it meets, so the
  // kernels need not test grad for zero.
  bool finite_scales;
};

}  // namespace optim_kernels
