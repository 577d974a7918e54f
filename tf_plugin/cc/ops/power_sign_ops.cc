// PowerSign op registrations: TfPluginApplyPowerSign (ref variables) and TfPluginResourceApplyPowerSign (resource
// handles), the same inputs and attrs as stock ApplyPowerSign / ResourceApplyPowerSign. The signature is also
// declared in tf_plugin/signatures.py; tests/test_signatures.py checks that both agree.
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
    .Input("var: Ref(T)")
    .Input("m: Ref(T)")
    .Input("lr: T")
    .Input("logbase: T")
    .Input("sign_decay: T")
    .Input("beta: T")
    .Input("grad: T")
    .Output("out: Ref(T)")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("use_locking: bool = false")
    .SetShapeFn(PowerSignShape<false>)
    .Doc(R"doc(
Updates '*var' according to the PowerSign update, in one fused pass.

m_t <- beta * m + (1 - beta) * grad
var <- var - lr * exp(logbase * sign_decay * sign(grad) * sign(m_t)) * grad
)doc");

REGISTER_OP("TfPluginResourceApplyPowerSign")
    .Input("var: resource")
    .Input("m: resource")
    .Input("lr: T")
    .Input("logbase: T")
    .Input("sign_decay: T")
    .Input("beta: T")
    .Input("grad: T")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("use_locking: bool = false")
    .SetShapeFn(PowerSignShape<true>)
    .Doc(R"doc(
Updates resource variables var and m in place according to the PowerSign update, in one fused pass.

m_t <- beta * m + (1 - beta) * grad
var <- var - lr * exp(logbase * sign_decay * sign(grad) * sign(m_t)) * grad
)doc");

}  // namespace tf_plugin
