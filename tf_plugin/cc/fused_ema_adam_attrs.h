// FusedEmaAdam's attributes, read and validated in one place for the shape function (errors when the graph is
// built) and the kernel constructor (errors in eager mode, where shape functions do not run).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tf_plugin {

struct FusedEmaAdamAttrs {
  float ema_decay = 0.9999f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  int64_t mode = 1;
  bool bias_correction = true;
  float weight_decay = 0.0f;
};

inline absl::Status CheckUnitInterval(const char* name, float x) {
  if (!(x >= 0.0f && x < 1.0f)) return absl::InvalidArgumentError(absl::StrCat(name, " must be in [0, 1), got ", x));
  return absl::OkStatus();
}

// Ctx is shape_inference::InferenceContext or OpKernelConstruction: both have GetAttr(name, &value).
template <typename Ctx>
absl::Status ReadFusedEmaAdamAttrs(Ctx* c, FusedEmaAdamAttrs* a) {
  TF_RETURN_IF_ERROR(c->GetAttr("ema_decay", &a->ema_decay));
  TF_RETURN_IF_ERROR(c->GetAttr("beta1", &a->beta1));
  TF_RETURN_IF_ERROR(c->GetAttr("beta2", &a->beta2));
  TF_RETURN_IF_ERROR(c->GetAttr("eps", &a->eps));
  TF_RETURN_IF_ERROR(c->GetAttr("mode", &a->mode));
  TF_RETURN_IF_ERROR(c->GetAttr("bias_correction", &a->bias_correction));
  TF_RETURN_IF_ERROR(c->GetAttr("weight_decay", &a->weight_decay));
  TF_RETURN_IF_ERROR(CheckUnitInterval("ema_decay", a->ema_decay));
  TF_RETURN_IF_ERROR(CheckUnitInterval("beta1", a->beta1));
  TF_RETURN_IF_ERROR(CheckUnitInterval("beta2", a->beta2));
  if (!(a->eps > 0.0f) || std::isinf(a->eps)) {
    return absl::InvalidArgumentError(absl::StrCat("eps must be a finite number > 0, got ", a->eps));
  }
  if (!(a->weight_decay >= 0.0f) || std::isinf(a->weight_decay)) {
    return absl::InvalidArgumentError(absl::StrCat("weight_decay must be a finite number >= 0, got ", a->weight_decay));
  }
  if (a->mode != 0 && a->mode != 1) {
    return absl::InvalidArgumentError(absl::StrCat("mode must be 0 (L2) or 1 (AdamW), got ", a->mode));
  }
  return absl::OkStatus();
}

}  // namespace tf_plugin
