// Shape-inference helpers shared by the optimizer ops: what can be checked before the op runs.
#pragma once

#include <string>

#include "tensorflow/core/framework/shape_inference.h"

namespace tf_plugin {

using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

// The shape of state input `index`: the variable's shape for a resource handle (unknown when the handle carries no
// shape data), the tensor's shape for a ref input.
inline ShapeHandle StateShape(InferenceContext* c, int index, bool is_resource) {
  if (!is_resource) return c->input(index);
  const auto* handle_data = c->input_handle_shapes_and_types(index);
  if (handle_data != nullptr && !handle_data->empty()) return (*handle_data)[0].shape;
  return c->UnknownShape();
}

// A one-element scalar: shape [] or [1].
inline absl::Status CheckScalarLike(InferenceContext* c, int index, const char* name) {
  ShapeHandle s = c->input(index);
  if (!c->RankKnown(s)) return absl::OkStatus();
  const int rank = c->Rank(s);
  const bool ok = rank == 0 || (rank == 1 && (!c->ValueKnown(c->Dim(s, 0)) || c->Value(c->Dim(s, 0)) == 1));
  if (!ok) {
    return absl::InvalidArgumentError(std::string(name) + " must be a scalar of shape [] or [1], got " +
                                      c->DebugString(s));
  }
  return absl::OkStatus();
}

// Merges the shapes of the named inputs (all must agree) into *out.
inline absl::Status MergeShapes(InferenceContext* c, const char* what, ShapeHandle a, ShapeHandle b,
                                ShapeHandle* out) {
  absl::Status st = c->Merge(a, b, out);
  if (!st.ok()) {
    return absl::InvalidArgumentError(std::string(what) + " do not have the same shape: " + c->DebugString(a) +
                                      " vs " + c->DebugString(b));
  }
  return absl::OkStatus();
}

}  // namespace tf_plugin
