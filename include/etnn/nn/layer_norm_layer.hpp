#pragma once
// nn::layer_norm bound to its input: PyTorch's nn.LayerNorm(shape of the sample), normalising each
// sample over all its values, with weight = 1 and bias = 0 of the sample's shape.
#include <algorithm>

#include "../core/static_checks.hpp"
#include "../cpu/layer_norm.hpp"
#include "layer.hpp"

namespace etnn::nn {

template <ShapeType In, int Index>
struct LayerNormLayer {
  static constexpr int width = static_cast<int>(In::size);
  static constexpr ParamInfo shaped(std::string_view name, std::size_t offset) {
    ParamInfo info{name, In::rank, {0, 0, 0, 0}, offset};
    std::copy(In::dims.begin(), In::dims.end(), info.shape.begin());
    return info;
  }

  using in_shape = In;
  using out_shape = In;
  static constexpr int module_index = Index;
  static constexpr std::size_t num_params = 2 * In::size;
  static constexpr std::array<ParamInfo, 2> params{{shaped("weight", 0), shaped("bias", In::size)}};
  static constexpr std::size_t saved_per_sample = 2;  // mean and 1 / std
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = false;

  template <class T>
  static void init(T* p, Rng&) {
    std::fill_n(p, In::size, T(1));
    std::fill_n(p + In::size, In::size, T(0));
  }

  template <class T, class Device>
  static void forward(Device device, const Pass<T>&, const T* p, const T* x, T* y, T* saved, int batch) {
    layer_norm_forward<width>(device, p, p + In::size, x, y, saved, batch);
  }

  template <class T, class Device>
  static void backward(Device device, const Pass<T>&, const T* p, T* g, const T* x, const T*, const T* saved, T* dy,
                       T* dx, int batch) {
    layer_norm_backward<width>(device, p, g, g + In::size, x, saved, dy, dx, batch);
  }
};

}  // namespace etnn::nn
