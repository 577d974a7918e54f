// CPU kernels of the multi-tensor ops TfPluginResourceApplyMultiPowerSign and TfPluginResourceApplyMultiFusedEmaAdam:
// the single-tensor kernels (kernels/) run on each variable's elements and its slice of the flat state, with the
// per-call scalars computed once for the whole step.
#define EIGEN_USE_THREADS

#include <algorithm>

#include "generated/op_spec.h"
#include "kernels/fused_ema_adam.h"
#include "kernels/power_sign.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tf_plugin/cc/op_kernels/multi_tensor.h"
#include "tf_plugin/cc/op_kernels/training_state.h"

namespace tf_plugin {

template <typename T>
class MultiPowerSignOp : public tensorflow::OpKernel {
 public:
  explicit MultiPowerSignOp(tensorflow::OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, ReadMultiPowerSignAttrs(c, &attrs_));
    OP_REQUIRES_OK(c, c->GetAttr("N", &n_));
  }

  void Compute(tensorflow::OpKernelContext* ctx) override {
    using tensorflow::Tensor;
    const Tensor& lr = ctx->input(n_ + 1);
    const Tensor& logbase = ctx->input(n_ + 2);
    const Tensor& sign_decay = ctx->input(n_ + 3);
    const Tensor& beta = ctx->input(n_ + 4);
    OP_REQUIRES_OK(ctx, CheckScalarLike(lr, "lr"));
    OP_REQUIRES_OK(ctx, CheckScalarLike(logbase, "logbase"));
    OP_REQUIRES_OK(ctx, CheckScalarLike(sign_decay, "sign_decay"));
    OP_REQUIRES_OK(ctx, CheckScalarLike(beta, "beta"));
    // Inputs: vars [0, N), m at N, lr, logbase, sign_decay, beta at N+1..N+4, grads [N+5, 2N+5).
    MultiTensorStep<T> step(ctx, n_, {"m"}, /*grads_start=*/n_ + 5, attrs_.state_offsets);
    if (!step.ok()) return;
    const auto scalars = optim_kernels::make_power_sign_scalars(ScalarValue<T>(lr), ScalarValue<T>(logbase),
                                                                ScalarValue<T>(sign_decay), ScalarValue<T>(beta));
    using S = storage_t<T>;
    S* m = step.flat(0);
    step.Run(5 * sizeof(T), [&](int, int64_t begin, int64_t end, S* var, const S* grad, int64_t offset) {
      optim_kernels::power_sign_update(var, m + offset, grad, scalars, begin, end);
    });
  }

 private:
  MultiPowerSignAttrs attrs_;
  int n_ = 0;
};

template <typename T>
class MultiFusedEmaAdamOp : public tensorflow::OpKernel {
 public:
  explicit MultiFusedEmaAdamOp(tensorflow::OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, ReadMultiFusedEmaAdamAttrs(c, &attrs_));
    OP_REQUIRES_OK(c, c->GetAttr("N", &n_));
    decays_.assign(n_, true);
    for (int64_t k : attrs_.no_decay) {
      OP_REQUIRES(c, k >= 0 && k < n_,
                  tensorflow::errors::InvalidArgument("no_decay holds ", k, ", not an index into the N = ", n_,
                                                      " variables"));
      decays_[k] = false;
    }
  }

  void Compute(tensorflow::OpKernelContext* ctx) override {
    using tensorflow::Tensor;
    const Tensor& step_tensor = ctx->input(2 * n_ + 3);
    const Tensor& lr = ctx->input(2 * n_ + 4);
    OP_REQUIRES_OK(ctx, CheckScalarLike(step_tensor, "step"));
    OP_REQUIRES_OK(ctx, CheckScalarLike(lr, "lr"));
    const int64_t step_value = step_tensor.flat<int64_t>()(0);
    const float lr_value = lr.flat<float>()(0);
    OP_REQUIRES_OK(ctx, CheckMultiFusedEmaAdamInputValues(attrs_, step_value, lr_value));
    // Inputs: vars [0, N), m, v, s at N..N+2, grads [N+3, 2N+3), step, lr.
    MultiTensorStep<T> step(ctx, n_, {"m", "v", "s"}, /*grads_start=*/n_ + 3, attrs_.state_offsets);
    if (!step.ok()) return;
    const auto& a = attrs_;
    const auto with_decay = optim_kernels::make_fused_ema_adam_scalars(
        lr_value, a.ema_decay, a.beta1, a.beta2, a.eps, a.mode, a.bias_correction, a.weight_decay, step_value);
    auto without_decay = with_decay;
    without_decay.weight_decay = 0.0f;
    using S = storage_t<T>;
    S* m = step.flat(0);
    S* v = step.flat(1);
    S* s = step.flat(2);
    step.Run(9 * sizeof(T), [&](int k, int64_t begin, int64_t end, S* var, const S* grad, int64_t offset) {
      optim_kernels::fused_ema_adam_update(grad, var, m + offset, v + offset, s + offset,
                                           decays_[k] ? with_decay : without_decay, begin, end);
    });
  }

 private:
  MultiFusedEmaAdamAttrs attrs_;
  int n_ = 0;
  std::vector<bool> decays_;
};

#define REGISTER_MULTI_KERNELS(T)                                                                              \
  REGISTER_KERNEL_BUILDER(                                                                                     \
      Name("TfPluginResourceApplyMultiPowerSign").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"),       \
      MultiPowerSignOp<T>);
TF_CALL_half(REGISTER_MULTI_KERNELS);
TF_CALL_bfloat16(REGISTER_MULTI_KERNELS);
TF_CALL_float(REGISTER_MULTI_KERNELS);
TF_CALL_double(REGISTER_MULTI_KERNELS);
#undef REGISTER_MULTI_KERNELS

#define REGISTER_MULTI_KERNELS(T)                                                                              \
  REGISTER_KERNEL_BUILDER(                                                                                     \
      Name("TfPluginResourceApplyMultiFusedEmaAdam").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"),    \
      MultiFusedEmaAdamOp<T>);
TF_CALL_half(REGISTER_MULTI_KERNELS);
TF_CALL_bfloat16(REGISTER_MULTI_KERNELS);
TF_CALL_float(REGISTER_MULTI_KERNELS);
#undef REGISTER_MULTI_KERNELS

}  // namespace tf_plugin
