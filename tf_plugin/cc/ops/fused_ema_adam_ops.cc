// FusedEmaAdam op registrations: TfPluginApplyFusedEmaAdam (ref variables) and TfPluginResourceApplyFusedEmaAdam
// (resource handles). TF has no stock equivalent; the hyper-parameters are GE's ApplyFusedEmaAdam attributes
// except lr, a float32 tensor so that schedules can change it every step. The signature is also declared in
// tf_plugin/signatures.py; tests/test_signatures.py checks that both agree.
#include "tensorflow/core/framework/op.h"
#include "tf_plugin/cc/fused_ema_adam_attrs.h"
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

constexpr char kFusedEmaAdamDoc[] = R"doc(
Adam/AdamW fused with an exponential moving average of the weights (CANN ApplyFusedEmaAdam), one pass in float32.

(c1, c2) = (1 - beta1^step, 1 - beta2^step) if bias_correction else (1, 1)
g        = grad + weight_decay * var        if mode == 0 else grad
m        = beta1 * m + (1 - beta1) * g
v        = beta2 * v + (1 - beta2) * g^2
update   = (m / c1) / (sqrt(v / c2) + eps)  (+ weight_decay * var if mode == 1)
var      = var - lr * update
s        = ema_decay * s + (1 - ema_decay) * var
)doc";

}  // namespace

#define FUSED_EMA_ADAM_ATTRS                                 \
  Attr("T: {half, bfloat16, float}")                         \
      .Attr("ema_decay: float = 0.9999")                     \
      .Attr("beta1: float = 0.9")                            \
      .Attr("beta2: float = 0.999")                          \
      .Attr("eps: float = 1e-8")                             \
      .Attr("mode: int = 1")                                 \
      .Attr("bias_correction: bool = true")                  \
      .Attr("weight_decay: float = 0.0")                     \
      .Attr("use_locking: bool = false")

REGISTER_OP("TfPluginApplyFusedEmaAdam")
    .Input("var: Ref(T)")
    .Input("m: Ref(T)")
    .Input("v: Ref(T)")
    .Input("s: Ref(T)")
    .Input("grad: T")
    .Input("step: int64")
    .Input("lr: float")
    .Output("out: Ref(T)")
    .FUSED_EMA_ADAM_ATTRS
    .SetShapeFn(FusedEmaAdamShape<false>)
    .Doc(kFusedEmaAdamDoc);

REGISTER_OP("TfPluginResourceApplyFusedEmaAdam")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .Input("s: resource")
    .Input("grad: T")
    .Input("step: int64")
    .Input("lr: float")
    .FUSED_EMA_ADAM_ATTRS
    .SetShapeFn(FusedEmaAdamShape<true>)
    .Doc(kFusedEmaAdamDoc);

#undef FUSED_EMA_ADAM_ATTRS

}  // namespace tf_plugin
