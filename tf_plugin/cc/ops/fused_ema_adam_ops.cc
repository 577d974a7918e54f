// FusedEmaAdam op registrations: TfPluginApplyFusedEmaAdam (ref variables) and TfPluginResourceApplyFusedEmaAdam
// (resource handles). TF has no stock equivalent; the hyper-parameters are GE's ApplyFusedEmaAdam attributes
// except lr, a float32 tensor so that schedules can change it every step. The input/attr chain, the attribute
// checks and the doc are generated from op_spec (generated/op_spec.h); the shape function is hand-written.
#include "generated/op_spec.h"
#include "tensorflow/core/framework/op.h"
#include "tf_plugin/cc/ops/shape_fns.h"

namespace tf_plugin {
namespace {

template <bool is_resource>
absl::Status FusedEmaAdamShape(InferenceContext* c) {
  FusedEmaAdamAttrs attrs;
  TF_RETURN_IF_ERROR(ReadFusedEmaAdamAttrs(c, &attrs));
  ShapeHandle s = StateShape(c, 0, is_resource);
  TF_RETURN_IF_ERROR(MergeShapes(c, "var and m", s, StateShape(c, 1, is_resource), &s));
  TF_RETURN_IF_ERROR(MergeShapes(c, "var and v", s, StateShape(c, 2, is_resource), &s));
  TF_RETURN_IF_ERROR(MergeShapes(c, "var and s", s, StateShape(c, 3, is_resource), &s));
  TF_RETURN_IF_ERROR(MergeShapes(c, "var and grad", s, c->input(4), &s));
  TF_RETURN_IF_ERROR(CheckScalarLike(c, 5, "step"));
  TF_RETURN_IF_ERROR(CheckScalarLike(c, 6, "lr"));
  if (c->num_outputs() > 0) c->set_output(0, s);
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("TfPluginApplyFusedEmaAdam")
    TF_PLUGIN_FUSED_EMA_ADAM_REF_SIGNATURE
    .SetShapeFn(FusedEmaAdamShape<false>)
    .Doc(kFusedEmaAdamDoc);

REGISTER_OP("TfPluginResourceApplyFusedEmaAdam")
    TF_PLUGIN_FUSED_EMA_ADAM_RESOURCE_SIGNATURE
    .SetShapeFn(FusedEmaAdamShape<true>)
    .Doc(kFusedEmaAdamDoc);

}  // namespace tf_plugin
