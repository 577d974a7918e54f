// CPU kernels of TfPluginApplyPowerSign and TfPluginResourceApplyPowerSign on kernels/power_sign.h.
#define EIGEN_USE_THREADS

#include "kernels/power_sign.h"

#include "generated/op_spec.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tf_plugin/cc/op_kernels/sharding.h"
#include "tf_plugin/cc/op_kernels/storage_types.h"
#include "tf_plugin/cc/op_kernels/training_state.h"

namespace tf_plugin {

template <typename T>
class PowerSignOp : public tensorflow::OpKernel {
 public:
  explicit PowerSignOp(tensorflow::OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, ReadPowerSignAttrs(c, &attrs_));
  }

  void Compute(tensorflow::OpKernelContext* ctx) override {
    using tensorflow::Tensor;
    const Tensor& lr = ctx->input(2);
    const Tensor& logbase = ctx->input(3);
    const Tensor& sign_decay = ctx->input(4);
    const Tensor& beta = ctx->input(5);
    const Tensor& grad = ctx->input(6);
    OP_REQUIRES_OK(ctx, CheckScalarLike(lr, "lr"));
    OP_REQUIRES_OK(ctx, CheckScalarLike(logbase, "logbase"));
    OP_REQUIRES_OK(ctx, CheckScalarLike(sign_decay, "sign_decay"));
    OP_REQUIRES_OK(ctx, CheckScalarLike(beta, "beta"));
    WithLockedState<T>(ctx, {0, 1}, {"var", "m"}, attrs_.use_locking, [&](std::vector<Tensor>& state) {
      Tensor& var = state[0];
      Tensor& m = state[1];
      OP_REQUIRES_OK(ctx, CheckSameShape(var, "var", m, "m"));
      OP_REQUIRES_OK(ctx, CheckSameShape(var, "var", grad, "grad"));
      using S = storage_t<T>;
      const auto scalars = optim_kernels::make_power_sign_scalars(ScalarValue<T>(lr), ScalarValue<T>(logbase),
                                                                  ScalarValue<T>(sign_decay), ScalarValue<T>(beta));
      S* var_p = StoragePtr<T>(var);
      S* m_p = StoragePtr<T>(m);
      const S* grad_p = StoragePtr<T>(grad);
      ParallelForRange(ctx, var.NumElements(), 5 * sizeof(T), [&](int64_t begin, int64_t end) {
        optim_kernels::power_sign_update(var_p, m_p, grad_p, scalars, begin, end);
      });
    });
    if (ctx->status().ok() && ctx->input_dtype(0) != tensorflow::DT_RESOURCE) {
      ctx->forward_ref_input_to_ref_output(0, 0);
    }
  }

 private:
  PowerSignAttrs attrs_;
};

#define REGISTER_POWER_SIGN_KERNELS(T)                                                                       \
  REGISTER_KERNEL_BUILDER(                                                                                   \
      Name("TfPluginApplyPowerSign").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"), PowerSignOp<T>); \
  REGISTER_KERNEL_BUILDER(Name("TfPluginResourceApplyPowerSign").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"), \
                          PowerSignOp<T>);

TF_CALL_half(REGISTER_POWER_SIGN_KERNELS);
TF_CALL_bfloat16(REGISTER_POWER_SIGN_KERNELS);
TF_CALL_float(REGISTER_POWER_SIGN_KERNELS);
TF_CALL_double(REGISTER_POWER_SIGN_KERNELS);
#undef REGISTER_POWER_SIGN_KERNELS

}  // namespace tf_plugin
