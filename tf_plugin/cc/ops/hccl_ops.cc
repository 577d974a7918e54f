// The collective ops of Ascend's TF adapter (hicann/tensorflow, tf_adapter/ops/hccl/hccl_ops.cc, the REG_OPs its
// npu_bridge.hccl.hccl_ops wrappers call): HcomAllReduce, HcomAllGather, HcomBroadcast and HcomReduceScatter, with the
// same names, input and output names, attributes (none with a default, as there) and type lists, so that a graph
// holding them is the graph the adapter builds and lowers to GE's Hcom ops (CANN's op_proto/inc/hcom_ops.h) 1:1.
// Their CPU kernels (tf_plugin/cc/op_kernels/hccl_kernels.cc) run graph_ir/distributed's MPI engine.
#include <vector>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"

namespace tf_plugin {
namespace {

using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

absl::Status SameShape(InferenceContext* c) {
  for (int i = 0; i < c->num_inputs(); ++i) c->set_output(i, c->input(i));
  return absl::OkStatus();
}

// HcomAllGather (gather) and HcomReduceScatter (!gather): dim 0 is times or divided by rank_size, which must be > 0;
// an input of unknown rank or unknown dim 0 gives its own shape, as the adapter's shape functions do. A known dim 0
// that rank_size does not divide is an InvalidArgument (the adapter's TF_CHECK_OK would end the process).
template <bool gather>
absl::Status RankSizedShape(InferenceContext* c) {
  int64_t rank_size = 0;
  TF_RETURN_IF_ERROR(c->GetAttr("rank_size", &rank_size));
  const char* op = gather ? "HcomAllGather" : "HcomReduceScatter";
  if (rank_size <= 0) {
    return absl::InvalidArgumentError(std::string(op) + ": attribute 'rank_size' must be > 0 (the group's number " +
                                      "of ranks), got " + std::to_string(rank_size));
  }
  ShapeHandle x = c->input(0);
  if (!c->RankKnown(x)) {
    c->set_output(0, x);
    return absl::OkStatus();
  }
  ShapeHandle unused, rest;
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(x, 1, &unused));
  TF_RETURN_IF_ERROR(c->Subshape(x, 1, &rest));
  const int64_t first = c->Value(c->Dim(x, 0));
  if (first == InferenceContext::kUnknownDim) {
    c->set_output(0, x);
    return absl::OkStatus();
  }
  if (!gather && first % rank_size != 0) {
    return absl::InvalidArgumentError(std::string(op) + ": input's dim 0 (" + std::to_string(first) +
                                      ") must be a multiple of attribute 'rank_size' (" + std::to_string(rank_size) +
                                      "): each rank gets an equal block of the reduction");
  }
  ShapeHandle out;
  TF_RETURN_IF_ERROR(c->Concatenate(c->Vector(gather ? first * rank_size : first / rank_size), rest, &out));
  c->set_output(0, out);
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("HcomAllReduce")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: {int8, int16, int32, int64, float16, float32, bfloat16}")
    .Attr("reduction: {'min', 'max', 'prod', 'sum'}")
    .Attr("group: string")
    .Attr("fusion: int")
    .Attr("fusion_id: int")
    .SetIsStateful()
    .SetShapeFn(SameShape)
    .Doc("output = the elementwise `reduction` of every rank's input, on every rank of `group`.");

REGISTER_OP("HcomAllGather")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: {int8, int16, int32, float16, float32, int64, uint64, uint8, uint16, uint32, float64, bfloat16}")
    .Attr("group: string")
    .Attr("fusion: int")
    .Attr("fusion_id: int")
    .Attr("rank_size: int")
    .SetIsStateful()
    .SetShapeFn(RankSizedShape<true>)
    .Doc("output = every rank's input concatenated along dim 0 in rank order (dim 0 times rank_size).");

REGISTER_OP("HcomBroadcast")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: list(type) >= 0")
    .Attr("fusion: int")
    .Attr("fusion_id: int")
    .Attr("group: string")
    .Attr("root_rank: int")
    .SetIsStateful()
    .SetShapeFn(SameShape)
    .Doc("output_k = rank root_rank's input_k, on every rank of `group`.");

REGISTER_OP("HcomReduceScatter")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: {int8, int16, int32, int64, float16, float32, bfloat16}")
    .Attr("reduction: {'min', 'max', 'prod', 'sum'}")
    .Attr("group: string")
    .Attr("fusion: int")
    .Attr("fusion_id: int")
    .Attr("rank_size: int")
    .SetIsStateful()
    .SetShapeFn(RankSizedShape<false>)
    .Doc("output = block `rank` (along dim 0, rank_size blocks) of the `reduction` of every rank's input.");

}  // namespace tf_plugin
