// The prologue and the sharded loop of the multi-tensor ops: N variables (inputs [0, N)), F flat optimizer-state
// variables (inputs [N, N + F)) and N gradients (inputs [grads_start, grads_start + N)), all of dtype T.
//
// Everything is checked before anything is written: every handle names an initialized variable of dtype T, no
// variable appears twice (in place, a second update of the same buffer would not be what two ops in sequence give),
// each gradient has its variable's shape and each flat variable is 1-D with as many elements as all the variables
// together. The variables are locked in address order (as TF's training ops lock theirs), then copied where
// something else holds their buffer (TF's copy-on-write), and the whole step is cut into blocks over the
// concatenated elements as one job, so that a step of many small variables still uses every thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/kernels/training_op_helpers.h"
#include "tf_plugin/cc/op_kernels/sharding.h"
#include "tf_plugin/cc/op_kernels/storage_types.h"

namespace tf_plugin {

template <typename T>
class MultiTensorStep {
 public:
  using S = storage_t<T>;

  // Checks, locks and fetches; `flat_names` are the names of the flat inputs (m, v, s). On error, ctx holds the
  // status and ok() is false; nothing has been written.
  // `state_offsets`: the op's attribute (empty, or where each variable's state starts in the flat buffers).
  MultiTensorStep(tensorflow::OpKernelContext* ctx, int n, const std::vector<const char*>& flat_names,
                  int grads_start, const std::vector<int64_t>& state_offsets)
      : ctx_(ctx),
        n_(n),
        flat_count_(static_cast<int>(flat_names.size())),
        grads_start_(grads_start),
        state_offsets_(state_offsets) {
    status_ = Prepare(flat_names);
    if (!status_.ok()) ctx->CtxFailure(__FILE__, __LINE__, status_);
  }

  bool ok() const { return status_.ok(); }
  int64_t total() const { return offsets_.back(); }

  // fn(k, begin, end, var, grad, flat_offset): variable k's elements [begin, end), k's tensors, and where k's state
  // starts in the flat buffers. Called from the intra-op pool, blocks of about equal size over the whole step.
  template <typename Fn>
  void Run(int64_t bytes_per_element, Fn&& fn) {
    ParallelForRange(ctx_, total(), bytes_per_element, [&](int64_t begin, int64_t end) {
      // The first variable whose elements reach past `begin` (size-0 variables are skipped by the loop).
      int k = static_cast<int>(std::upper_bound(offsets_.begin(), offsets_.end(), begin) - offsets_.begin()) - 1;
      for (; k < n_ && offsets_[k] < end; ++k) {
        const int64_t lo = std::max(begin, offsets_[k]) - offsets_[k];
        const int64_t hi = std::min(end, offsets_[k + 1]) - offsets_[k];
        if (lo < hi) fn(k, lo, hi, var_ptrs_[k], grad_ptrs_[k], state_at_[k]);
      }
    });
  }

  S* flat(int f) { return StoragePtr<T>(flat_tensors_[f]); }

 private:
  absl::Status Prepare(const std::vector<const char*>& flat_names) {
    using tensorflow::errors::FailedPrecondition;
    using tensorflow::errors::InvalidArgument;
    const int count = n_ + flat_count_;
    vars_.resize(count);
    auto name = [&](int i) -> std::string {
      return i < n_ ? absl::StrCat("vars[", i, "]") : std::string(flat_names[i - n_]);
    };
    for (int i = 0; i < count; ++i) {
      if (ctx_->input_dtype(i) != tensorflow::DT_RESOURCE) {
        return InvalidArgument(name(i), " is not a resource handle");
      }
      if (!tensorflow::LookupResource(ctx_, tensorflow::HandleFromInput(ctx_, i), &vars_[i]).ok()) {
        return FailedPrecondition("Attempting to use uninitialized variables: ", name(i),
                                  " (no variable exists for this handle)");
      }
    }
    // The same variable twice: refused, naming both places.
    std::vector<std::pair<tensorflow::Var*, int>> by_address(count);
    for (int i = 0; i < count; ++i) by_address[i] = {vars_[i].get(), i};
    std::sort(by_address.begin(), by_address.end());
    for (int i = 1; i < count; ++i) {
      if (by_address[i].first == by_address[i - 1].first) {
        const int a = std::min(by_address[i].second, by_address[i - 1].second);
        const int b = std::max(by_address[i].second, by_address[i - 1].second);
        return InvalidArgument(name(a), " and ", name(b), " are the same variable; each variable may appear once");
      }
    }
    // Distinct variables have distinct mutexes: lock them all, in address order.
    locks_.reserve(count);
    for (const auto& entry : by_address) locks_.emplace_back(*entry.first->mu());

    const tensorflow::DataType want = tensorflow::DataTypeToEnum<T>::v();
    for (int i = 0; i < count; ++i) {
      tensorflow::Var* var = vars_[i].get();
      if (!var->is_initialized || !var->tensor()->IsInitialized()) {
        return FailedPrecondition("Attempting to use uninitialized variables: ", name(i));
      }
      if (var->tensor()->dtype() != want) {
        return InvalidArgument(name(i), " is a variable of dtype ", tensorflow::DataTypeString(var->tensor()->dtype()),
                               " but the op's T is ", tensorflow::DataTypeString(want));
      }
    }
    offsets_.assign(n_ + 1, 0);
    for (int k = 0; k < n_; ++k) {
      const tensorflow::Tensor& var = *vars_[k]->tensor();
      const tensorflow::Tensor& grad = ctx_->input(grads_start_ + k);
      if (!var.shape().IsSameSize(grad.shape())) {
        return InvalidArgument("vars[", k, "] and grads[", k, "] do not have the same shape", var.shape().DebugString(),
                               " ", grad.shape().DebugString());
      }
      offsets_[k + 1] = offsets_[k] + var.NumElements();
    }
    TF_RETURN_IF_ERROR(PlaceState(flat_names));
    // Copy-on-write where a reader still holds a buffer: values do not change, so no update is half-applied even if
    // an allocation fails here.
    for (int i = 0; i < count; ++i) {
      TF_RETURN_IF_ERROR(tensorflow::PrepareToUpdateVariable<CPUDevice, T>(ctx_, vars_[i]->tensor(),
                                                                          vars_[i]->copy_on_read_mode.load()));
    }
    var_ptrs_.resize(n_);
    grad_ptrs_.resize(n_);
    for (int k = 0; k < n_; ++k) {
      var_ptrs_[k] = StoragePtr<T>(*vars_[k]->tensor());
      grad_ptrs_[k] = StoragePtr<T>(ctx_->input(grads_start_ + k));
    }
    for (int f = 0; f < flat_count_; ++f) flat_tensors_.push_back(*vars_[n_ + f]->tensor());
    return absl::OkStatus();
  }

  // Where each variable's state starts in the flat buffers (state_at_), checked against their size: every state
  // range inside the buffers, no two overlapping.
  absl::Status PlaceState(const std::vector<const char*>& flat_names) {
    using tensorflow::errors::InvalidArgument;
    const int64_t flat_size = flat_count_ > 0 ? vars_[n_]->tensor()->NumElements() : 0;
    for (int f = 0; f < flat_count_; ++f) {
      const tensorflow::Tensor& flat = *vars_[n_ + f]->tensor();
      if (state_offsets_.empty() && (flat.dims() != 1 || flat.NumElements() != total())) {
        return InvalidArgument(flat_names[f], " must be a flat variable of shape [", total(),
                               "] (the elements of all N variables), got ", flat.shape().DebugString());
      }
      if (flat.dims() != 1 || flat.NumElements() != flat_size) {
        return InvalidArgument(flat_names[f], " must be a flat variable of shape [", flat_size, "] (as ",
                               flat_names[0], "), got ", flat.shape().DebugString());
      }
    }
    if (state_offsets_.empty()) {
      state_at_.assign(offsets_.begin(), offsets_.end() - 1);
      return absl::OkStatus();
    }
    if (static_cast<int>(state_offsets_.size()) != n_) {
      return InvalidArgument("state_offsets has ", state_offsets_.size(), " entries, expected N = ", n_);
    }
    state_at_ = state_offsets_;
    std::vector<int> order(n_);
    for (int k = 0; k < n_; ++k) {
      const int64_t size = offsets_[k + 1] - offsets_[k];
      if (state_at_[k] < 0 || state_at_[k] > flat_size - size) {
        return InvalidArgument("state_offsets[", k, "] = ", state_at_[k], ": vars[", k, "]'s ", size,
                               " elements do not fit in the flat state of ", flat_size);
      }
      order[k] = k;
    }
    std::sort(order.begin(), order.end(), [&](int a, int b) { return state_at_[a] < state_at_[b]; });
    for (int j = 1; j < n_; ++j) {
      const int a = order[j - 1], b = order[j];
      if (state_at_[a] + (offsets_[a + 1] - offsets_[a]) > state_at_[b]) {
        return InvalidArgument("state_offsets: the state of vars[", a, "] and vars[", b, "] overlap");
      }
    }
    return absl::OkStatus();
  }

  using CPUDevice = Eigen::ThreadPoolDevice;

  tensorflow::OpKernelContext* ctx_;
  const int n_;
  const int flat_count_;
  const int grads_start_;
  const std::vector<int64_t>& state_offsets_;
  std::vector<int64_t> state_at_;  // where variable k's state starts in the flat buffers
  absl::Status status_;
  std::vector<tensorflow::core::RefCountPtr<tensorflow::Var>> vars_;
  std::vector<tsl::mutex_lock> locks_;  // released when the step ends, after the update
  std::vector<int64_t> offsets_;        // offsets_[k]: where variable k starts in the flat buffers; back(): total
  std::vector<S*> var_ptrs_;
  std::vector<const S*> grad_ptrs_;
  std::vector<tensorflow::Tensor> flat_tensors_;
};

}  // namespace tf_plugin
