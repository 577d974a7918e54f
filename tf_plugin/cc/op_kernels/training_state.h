// Access to the state inputs (var, m, ...) of a dense training op, ref or resource, with TensorFlow's semantics:
// resource variables are always locked for dense updates (use_locking only matters for ref variables), a buffer that
// something else holds is copied before the update (copy-on-write), otherwise the update is in place.
// Unlike stock TF, a missing or uninitialized variable is FailedPrecondition and a variable whose dtype is not T is
// InvalidArgument, both before anything is touched.
#pragma once

#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/kernels/training_op_helpers.h"

namespace tf_plugin {

using CPUDevice = Eigen::ThreadPoolDevice;

// Checks that every resource state input names an existing, initialized variable of dtype T. Called before locking:
// TF's lock helper reports a missing variable as Internal("Invalid variable reference.").
template <typename T>
absl::Status CheckStateVariables(tensorflow::OpKernelContext* ctx, const std::vector<int>& inputs,
                                 const std::vector<const char*>& names) {
  for (size_t k = 0; k < inputs.size(); ++k) {
    const int i = inputs[k];
    if (ctx->input_dtype(i) != tensorflow::DT_RESOURCE) continue;
    tensorflow::core::RefCountPtr<tensorflow::Var> var;
    if (!tensorflow::LookupResource(ctx, tensorflow::HandleFromInput(ctx, i), &var).ok()) {
      return tensorflow::errors::FailedPrecondition("Attempting to use uninitialized variables: ", names[k],
                                                    " (no variable exists for this handle)");
    }
    tensorflow::tf_shared_lock lock(*var->mu());
    if (!var->is_initialized || !var->tensor()->IsInitialized()) {
      return tensorflow::errors::FailedPrecondition("Attempting to use uninitialized variables: ", names[k]);
    }
    const tensorflow::DataType want = tensorflow::DataTypeToEnum<T>::v();
    if (var->tensor()->dtype() != want) {
      return tensorflow::errors::InvalidArgument(names[k], " is a variable of dtype ",
                                                 tensorflow::DataTypeString(var->tensor()->dtype()),
                                                 " but the op's T is ", tensorflow::DataTypeString(want));
    }
  }
  return absl::OkStatus();
}

// The mutable state tensors, to be called with the locks held. Resource variables get copy-on-write here.
template <typename T>
absl::Status GetStateTensors(tensorflow::OpKernelContext* ctx, const std::vector<int>& inputs,
                             const std::vector<const char*>& names, bool use_locking,
                             std::vector<tensorflow::Tensor>* out) {
  out->resize(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    TF_RETURN_IF_ERROR(tensorflow::GetInputTensorFromVariable<CPUDevice, T>(ctx, inputs[k], use_locking,
                                                                            /*sparse=*/false, &(*out)[k]));
    if (!(*out)[k].IsInitialized()) {
      return tensorflow::errors::FailedPrecondition("Attempting to use uninitialized variables: ", names[k]);
    }
  }
  return absl::OkStatus();
}

// A hyper-parameter tensor with exactly one element, of shape [] or [1].
inline absl::Status CheckScalarLike(const tensorflow::Tensor& t, const char* name) {
  if (t.NumElements() != 1 || t.dims() > 1) {
    return tensorflow::errors::InvalidArgument(name, " is not a scalar: ", t.shape().DebugString(),
                                               " (expected shape [] or [1])");
  }
  return absl::OkStatus();
}

// Stock wording: "var and m do not have the same shape[3] [4]".
inline absl::Status CheckSameShape(const tensorflow::Tensor& a, const char* a_name, const tensorflow::Tensor& b,
                                   const char* b_name) {
  if (!a.shape().IsSameSize(b.shape())) {
    return tensorflow::errors::InvalidArgument(a_name, " and ", b_name, " do not have the same shape",
                                               a.shape().DebugString(), " ", b.shape().DebugString());
  }
  return absl::OkStatus();
}

// The dense update's prologue: checks the state variables, locks them (in a fixed order, as stock training ops),
// fetches their tensors (copy-on-write for resource variables), then runs fn(state) with the locks held. Any error
// is set on ctx before anything is written.
template <typename T, typename Fn>
void WithLockedState(tensorflow::OpKernelContext* ctx, const std::vector<int>& inputs,
                     const std::vector<const char*>& names, bool use_locking, Fn&& fn) {
  OP_REQUIRES_OK(ctx, CheckStateVariables<T>(ctx, inputs, names));
  auto locks = tensorflow::MaybeLockVariableInputMutexesInOrder<CPUDevice, T>(ctx, use_locking, /*sparse=*/false,
                                                                              inputs);
  std::vector<tensorflow::Tensor> state;
  OP_REQUIRES_OK(ctx, GetStateTensors<T>(ctx, inputs, names, use_locking, &state));
  fn(state);
}

}  // namespace tf_plugin
