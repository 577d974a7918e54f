// Multi-tensor op registrations: TfPluginResourceApplyMultiPowerSign and TfPluginResourceApplyMultiFusedEmaAdam.
// One call updates N resource variables of one dtype; the optimizer state (m; or m, v, s) is one flat 1-D variable
// per name, every variable's state concatenated in vars order. The input/attr chains and the docs are generated from
// op_spec (MultiOpSignature); the shape functions are hand-written.
#include "generated/op_spec.h"
#include "tensorflow/core/framework/op.h"
#include "tf_plugin/cc/ops/shape_fns.h"

namespace tf_plugin {
namespace {

// vars[k] and grads[k] agree; each flat input is 1-D, of the total size when every variable's shape is known and the
// state is concatenated in vars order (`exact`: no state_offsets).
absl::Status MultiShape(InferenceContext* c, int n, int flat_count, int grads_start, bool exact) {
  int64_t total = 0;
  bool total_known = true;
  for (int k = 0; k < n; ++k) {
    ShapeHandle s;
    TF_RETURN_IF_ERROR(MergeShapes(c, "vars[k] and grads[k]", StateShape(c, k, true), c->input(grads_start + k), &s));
    const int64_t elements = c->RankKnown(s) ? c->Value(c->NumElements(s)) : -1;
    if (elements < 0) total_known = false;
    total += elements;
  }
  for (int f = 0; f < flat_count; ++f) {
    ShapeHandle flat = StateShape(c, n + f, true);
    if (!c->RankKnown(flat)) continue;
    if (c->Rank(flat) != 1) {
      return absl::InvalidArgumentError("the flat optimizer state must be 1-D, got " + c->DebugString(flat));
    }
    if (exact && total_known && c->ValueKnown(c->Dim(flat, 0)) && c->Value(c->Dim(flat, 0)) != total) {
      return absl::InvalidArgumentError("the flat optimizer state has " + std::to_string(c->Value(c->Dim(flat, 0))) +
                                        " elements, but the N variables have " + std::to_string(total));
    }
  }
  return absl::OkStatus();
}

absl::Status MultiPowerSignShape(InferenceContext* c) {
  MultiPowerSignAttrs attrs;
  TF_RETURN_IF_ERROR(ReadMultiPowerSignAttrs(c, &attrs));
  int n;
  TF_RETURN_IF_ERROR(c->GetAttr("N", &n));
  static const char* const kScalars[] = {"lr", "logbase", "sign_decay", "beta"};  // inputs N+1 .. N+4
  for (int k = 0; k < 4; ++k) TF_RETURN_IF_ERROR(CheckScalarLike(c, n + 1 + k, kScalars[k]));
  return MultiShape(c, n, 1, n + 5, attrs.state_offsets.empty());
}

absl::Status MultiFusedEmaAdamShape(InferenceContext* c) {
  MultiFusedEmaAdamAttrs attrs;
  TF_RETURN_IF_ERROR(ReadMultiFusedEmaAdamAttrs(c, &attrs));
  int n;
  TF_RETURN_IF_ERROR(c->GetAttr("N", &n));
  for (int64_t k : attrs.no_decay) {
    if (k < 0 || k >= n) {
      return absl::InvalidArgumentError("no_decay holds " + std::to_string(k) + ", not an index into the N = " +
                                        std::to_string(n) + " variables");
    }
  }
  TF_RETURN_IF_ERROR(CheckScalarLike(c, 2 * n + 3, "step"));
  TF_RETURN_IF_ERROR(CheckScalarLike(c, 2 * n + 4, "lr"));
  return MultiShape(c, n, 3, n + 3, attrs.state_offsets.empty());
}

}  // namespace

REGISTER_OP("TfPluginResourceApplyMultiPowerSign")
    TF_PLUGIN_MULTI_POWER_SIGN_RESOURCE_SIGNATURE
    .SetShapeFn(MultiPowerSignShape)
    .Doc(kMultiPowerSignDoc);

REGISTER_OP("TfPluginResourceApplyMultiFusedEmaAdam")
    TF_PLUGIN_MULTI_FUSED_EMA_ADAM_RESOURCE_SIGNATURE
    .SetShapeFn(MultiFusedEmaAdamShape)
    .Doc(kMultiFusedEmaAdamDoc);

}  // namespace tf_plugin
