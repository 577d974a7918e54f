// CPU kernels of HcomAllReduce, HcomAllGather, HcomBroadcast and HcomReduceScatter (tf_plugin/cc/ops/hccl_ops.cc).
// A kernel allocates its outputs and hands every input and output buffer, with a JSON description of the op (its
// type, node name, attributes, the inputs' dtypes and shapes, the outputs' shapes), to the collective engine that
// Python registered with TfPluginHcomSetEngine: tf_plugin/hccl/engine.py, a ctypes callback running
// graph_ir/distributed's collectives (the MPI engine of graph_ir.Session: world() group, bounded waits, deterministic
// float reductions). The callback takes the GIL itself (ctypes); it fills the outputs, or returns an absl status
// code and writes a message naming the op, its node and what it got.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

extern "C" {
// The engine: request (JSON), input and output buffer pointers (null for empty tensors), and an error buffer.
// Returns 0, or an absl::StatusCode with a message in `error`.
typedef int (*TfPluginHcomEngine)(const char* request, void* const* inputs, void* const* outputs, char* error,
                                  int64_t error_size);
}

namespace tf_plugin {
namespace {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;

std::atomic<TfPluginHcomEngine> g_engine{nullptr};
constexpr int64_t kErrorSize = 8192;

std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (unsigned char ch : text) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20) {
      char buffer[8];
      snprintf(buffer, sizeof(buffer), "\\u%04x", ch);
      out += buffer;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "\"";
}

std::string ShapeJson(const TensorShape& shape) {
  std::string out = "[";
  for (int d = 0; d < shape.dims(); ++d) out += (d ? "," : "") + std::to_string(shape.dim_size(d));
  return out + "]";
}

class HcomKernel : public OpKernel {
 public:
  explicit HcomKernel(OpKernelConstruction* context) : OpKernel(context) {
    std::string attrs;
    for (const char* name : {"reduction", "group"}) {
      std::string value;
      if (context->HasAttr(name)) {
        OP_REQUIRES_OK(context, context->GetAttr(name, &value));
        attrs += (attrs.empty() ? "" : ",") + Quoted(name) + ":" + Quoted(value);
      }
    }
    for (const char* name : {"fusion", "fusion_id", "rank_size", "root_rank"}) {
      int64_t value = 0;
      if (context->HasAttr(name)) {
        OP_REQUIRES_OK(context, context->GetAttr(name, &value));
        attrs += (attrs.empty() ? "" : ",") + Quoted(name) + ":" + std::to_string(value);
        if (std::string(name) == "rank_size") rank_size_ = value;
      }
    }
    head_ = "{\"op\":" + Quoted(type_string()) + ",\"node\":" + Quoted(name()) + ",\"attrs\":{" + attrs + "}";
  }

  void Compute(OpKernelContext* context) override {
    const std::string what = type_string() + " '" + name() + "'";
    const TfPluginHcomEngine engine = g_engine.load();
    OP_REQUIRES(context, engine != nullptr,
                absl::FailedPreconditionError(what + ": no collective engine is registered in this process: import "
                                              "tf_plugin.hccl (it runs graph_ir.distributed's MPI engine; launch "
                                              "one process per rank with mpiexec)"));
    std::vector<void*> inputs, outputs;
    std::string ins, outs;
    for (int i = 0; i < context->num_inputs(); ++i) {
      const Tensor& x = context->input(i);
      TensorShape shape = x.shape();
      if (type_string() == "HcomAllGather" || type_string() == "HcomReduceScatter") {
        OP_REQUIRES(context, shape.dims() >= 1,
                    absl::InvalidArgumentError(what + ": input must have rank >= 1 (the ranks' blocks lie along dim "
                                               "0), got a scalar"));
        OP_REQUIRES(context, rank_size_ >= 1,
                    absl::InvalidArgumentError(what + ": attribute 'rank_size' must be > 0, got " +
                                               std::to_string(rank_size_)));
        const int64_t first = shape.dim_size(0);
        if (type_string() == "HcomAllGather") {
          shape.set_dim(0, first * rank_size_);
        } else {
          OP_REQUIRES(context, first % rank_size_ == 0,
                      absl::InvalidArgumentError(what + ": input's dim 0 (" + std::to_string(first) + ") must be a "
                                                 "multiple of attribute 'rank_size' (" + std::to_string(rank_size_) +
                                                 ")"));
          shape.set_dim(0, first / rank_size_);
        }
      }
      Tensor* y = nullptr;
      OP_REQUIRES_OK(context, context->allocate_output(i, shape, &y));
      inputs.push_back(x.NumElements() ? const_cast<char*>(x.tensor_data().data()) : nullptr);
      outputs.push_back(y->NumElements() ? const_cast<char*>(y->tensor_data().data()) : nullptr);
      ins += (i ? "," : "") + std::string("{\"dtype\":") + std::to_string(static_cast<int>(x.dtype())) +
             ",\"shape\":" + ShapeJson(x.shape()) + "}";
      outs += (i ? "," : "") + ShapeJson(shape);
    }
    const std::string request = head_ + ",\"inputs\":[" + ins + "],\"outputs\":[" + outs + "]}";
    std::vector<char> error(kErrorSize, 0);
    const int code = engine(request.c_str(), inputs.data(), outputs.data(), error.data(), kErrorSize);
    if (code != 0) {
      error[kErrorSize - 1] = 0;
      context->SetStatus(absl::Status(static_cast<absl::StatusCode>(code), error.data()));
    }
  }

 private:
  std::string head_;
  int64_t rank_size_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("HcomAllReduce").Device(::tensorflow::DEVICE_CPU), HcomKernel);
REGISTER_KERNEL_BUILDER(Name("HcomAllGather").Device(::tensorflow::DEVICE_CPU), HcomKernel);
REGISTER_KERNEL_BUILDER(Name("HcomBroadcast").Device(::tensorflow::DEVICE_CPU), HcomKernel);
REGISTER_KERNEL_BUILDER(Name("HcomReduceScatter").Device(::tensorflow::DEVICE_CPU), HcomKernel);

}  // namespace
}  // namespace tf_plugin

// Called by tf_plugin/hccl/engine.py through ctypes (the library is dlopen-ed once more by path, which returns the
// handle tf.load_op_library made): sets the engine every kernel calls (null: none).
extern "C" __attribute__((visibility("default"))) void TfPluginHcomSetEngine(TfPluginHcomEngine engine) {
  tf_plugin::g_engine.store(engine);
}
