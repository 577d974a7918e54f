// PowerSign op registrations: TfPluginApplyPowerSign (ref variables) and TfPluginResourceApplyPowerSign (resource
// handles), with the inputs and attributes of stock ApplyPowerSign / ResourceApplyPowerSign. The input/attr chain
// and the doc are generated from op_spec (generated/op_spec.h); the shape function is the only hand-written part.
#include "generated/op_spec.h"
#include "tensorflow/core/framework/op.h"
#include "tf_plugin/cc/ops/shape_fns.h"

namespace tf_plugin {
namespace {

template <bool is_resource>
absl::Status PowerSignShape(InferenceContext* c) {
  ShapeHandle s;
  TF_RETURN_IF_ERROR(MergeShapes(c, "var and m", StateShape(c, 0, is_resource), StateShape(c, 1, is_resource), &s));
  TF_RETURN_IF_ERROR(CheckScalarLike(c, 2, "lr"));
  TF_RETURN_IF_ERROR(CheckScalarLike(c, 3, "logbase"));
  TF_RETURN_IF_ERROR(CheckScalarLike(c, 4, "sign_decay"));
  TF_RETURN_IF_ERROR(CheckScalarLike(c, 5, "beta"));
  TF_RETURN_IF_ERROR(MergeShapes(c, "var and grad", s, c->input(6), &s));
  if (c->num_outputs() > 0) c->set_output(0, s);
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("TfPluginApplyPowerSign")
    TF_PLUGIN_POWER_SIGN_REF_SIGNATURE
    .SetShapeFn(PowerSignShape<false>)
    .Doc(kPowerSignDoc);

REGISTER_OP("TfPluginResourceApplyPowerSign")
    TF_PLUGIN_POWER_SIGN_RESOURCE_SIGNATURE
    .SetShapeFn(PowerSignShape<true>)
    .Doc(kPowerSignDoc);

}  // namespace tf_plugin
