#pragma once
// Private to tensor/: include <etnn/tensor/tensor.hpp> or <etnn/etnn.hpp>.
// Copies between host memory and a device's memory, by device tag: code written once for every
// device reads and writes a model's values through these (checkpoints, evaluation, staging).
// The host's own are plain copies; the CUDA ones live in cuda/memory.hpp.
//   etnn::copy_to_host(Device{}, host, device_values, n);
//   auto on_host = etnn::to_host(model.forward(x));   // a Tensor in host memory
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "../core/device.hpp"
#include "tensor_view.hpp"

namespace etnn {

template <class T>
void copy_to_host(Cpu, T* host, const T* values, std::size_t n) {
  std::copy_n(values, n, host);
}

template <class T>
void copy_from_host(Cpu, T* values, const T* host, std::size_t n) {
  std::copy_n(host, n, values);
}

// rows x width values from src (rows src_pitch values apart) to dst (rows dst_pitch apart), in one
// device's memory: a column block of a (rows, pitch) matrix (nn::concat's halves).
template <class T>
void copy_rows(Cpu, const T* src, std::size_t src_pitch, T* dst, std::size_t dst_pitch, std::size_t width,
               std::size_t rows) {
  for (std::size_t r = 0; r < rows; ++r) std::copy_n(src + r * src_pitch, width, dst + r * dst_pitch);
}

// A host copy of a tensor or view on any device.
template <class X>
auto to_host(const X& x) {
  const auto view = const_view(x);
  using V = decltype(view);
  Tensor<typename V::value_type, typename V::shape, Cpu> out(view.batch());
  copy_to_host(typename V::device{}, out.data(), view.data(), view.size());
  return out;
}

}  // namespace etnn
