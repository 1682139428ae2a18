#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// nn::flatten: (B, C, H, W) -> (B, C*H*W). Row-major storage makes it a reinterpretation:
// its output is its input, and it does no work in either direction.
#include "layer.hpp"

namespace etnn::nn {

template <ShapeType In, int Index>
struct FlattenLayer : ParameterFree {
  using in_shape = In;
  using out_shape = Flat<In>;
  static constexpr int module_index = Index;
  static constexpr std::size_t saved_per_sample = 0;
  static constexpr bool output_aliases_input = true;
  static constexpr bool backward_in_place = true;
  static constexpr bool cuda_kernels = true;  // no work on any device

  template <class T, class Device>
  static void forward(Device, const Pass<T>&, const T*, const T*, T*, T*, int) {}
  template <class T, class Device>
  static void backward(Device, const Pass<T>&, const T*, T*, const T*, const T*, const T*, T*, T*, int) {}
};

}  // namespace etnn::nn
