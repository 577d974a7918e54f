// TensorFlow element types -> the kernels' framework-free storage types (same 16-bit layout for the half types).
#pragma once

#include <type_traits>

#include "kernels/float_types.h"
#include "tensorflow/core/framework/numeric_types.h"
#include "tensorflow/core/framework/tensor.h"

namespace tf_plugin {

template <typename T>
struct StorageOf {
  using type = T;
};
template <>
struct StorageOf<Eigen::half> {
  using type = optim_kernels::half_t;
};
template <>
struct StorageOf<tensorflow::bfloat16> {
  using type = optim_kernels::bfloat16_t;
};

template <typename T>
using storage_t = typename StorageOf<T>::type;

template <typename T>
storage_t<T>* StoragePtr(tensorflow::Tensor& t) {
  static_assert(sizeof(storage_t<T>) == sizeof(T), "storage type must match the TF type's layout");
  return reinterpret_cast<storage_t<T>*>(t.flat<T>().data());
}

template <typename T>
const storage_t<T>* StoragePtr(const tensorflow::Tensor& t) {
  return reinterpret_cast<const storage_t<T>*>(t.flat<T>().data());
}

// The one element of a [] or [1] hyper-parameter tensor, widened to the compute type.
template <typename T>
optim_kernels::compute_t<storage_t<T>> ScalarValue(const tensorflow::Tensor& t) {
  return static_cast<optim_kernels::compute_t<storage_t<T>>>(t.flat<T>()(0));
}

}  // namespace tf_plugin
