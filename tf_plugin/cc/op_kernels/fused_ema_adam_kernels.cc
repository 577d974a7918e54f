// CPU kernels of TfPluginApplyFusedEmaAdam and TfPluginResourceApplyFusedEmaAdam on kernels/fused_ema_adam.h.
#define EIGEN_USE_THREADS

#include "kernels/fused_ema_adam.h"

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "generated/op_spec.h"
#include "tf_plugin/cc/op_kernels/sharding.h"
#include "tf_plugin/cc/op_kernels/storage_types.h"
#include "tf_plugin/cc/op_kernels/training_state.h"

namespace tf_plugin {

template <typename T>
class FusedEmaAdamOp : public tensorflow::OpKernel {
 public:
  explicit FusedEmaAdamOp(tensorflow::OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, ReadFusedEmaAdamAttrs(c, &attrs_));
  }

  void Compute(tensorflow::OpKernelContext* ctx) override {
    using tensorflow::Tensor;
    const Tensor& grad = ctx->input(4);
    const Tensor& step = ctx->input(5);
    const Tensor& lr = ctx->input(6);
    OP_REQUIRES_OK(ctx, CheckScalarLike(step, "step"));
    OP_REQUIRES_OK(ctx, CheckScalarLike(lr, "lr"));
    const int64_t step_value = step.flat<int64_t>()(0);
    const float lr_value = lr.flat<float>()(0);
    OP_REQUIRES_OK(ctx, CheckFusedEmaAdamInputValues(attrs_, step_value, lr_value));
    static const std::vector<const char*> kStateNames = {"var", "m", "v", "s"};
    WithLockedState<T>(ctx, {0, 1, 2, 3}, kStateNames, attrs_.use_locking, [&](std::vector<Tensor>& state) {
      for (int k = 1; k < 4; ++k) OP_REQUIRES_OK(ctx, CheckSameShape(state[0], "var", state[k], kStateNames[k]));
      OP_REQUIRES_OK(ctx, CheckSameShape(state[0], "var", grad, "grad"));
      const auto scalars = optim_kernels::make_fused_ema_adam_scalars(
          lr_value, attrs_.ema_decay, attrs_.beta1, attrs_.beta2, attrs_.eps, attrs_.mode, attrs_.bias_correction,
          attrs_.weight_decay, step_value);
      using S = storage_t<T>;
      const S* grad_p = StoragePtr<T>(grad);
      S* var_p = StoragePtr<T>(state[0]);
      S* m_p = StoragePtr<T>(state[1]);
      S* v_p = StoragePtr<T>(state[2]);
      S* s_p = StoragePtr<T>(state[3]);
      ParallelForRange(ctx, grad.NumElements(), 9 * sizeof(T), [&](int64_t begin, int64_t end) {
        optim_kernels::fused_ema_adam_update(grad_p, var_p, m_p, v_p, s_p, scalars, begin, end);
      });
    });
    if (ctx->status().ok() && ctx->input_dtype(0) != tensorflow::DT_RESOURCE) {
      ctx->forward_ref_input_to_ref_output(0, 0);
    }
  }

 private:
  FusedEmaAdamAttrs attrs_;
};

#define REGISTER_FUSED_EMA_ADAM_KERNELS(T)                                                                    \
  REGISTER_KERNEL_BUILDER(                                                                                    \
      Name("TfPluginApplyFusedEmaAdam").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"),                \
      FusedEmaAdamOp<T>);                                                                                     \
  REGISTER_KERNEL_BUILDER(                                                                                    \
      Name("TfPluginResourceApplyFusedEmaAdam").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"),        \
      FusedEmaAdamOp<T>);

TF_CALL_half(REGISTER_FUSED_EMA_ADAM_KERNELS);
TF_CALL_bfloat16(REGISTER_FUSED_EMA_ADAM_KERNELS);
TF_CALL_float(REGISTER_FUSED_EMA_ADAM_KERNELS);
#undef REGISTER_FUSED_EMA_ADAM_KERNELS

}  // namespace tf_plugin
