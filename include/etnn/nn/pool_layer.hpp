#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// nn::max_pool2d<K, stride<S>, pad<P>> and nn::avg_pool2d<...> bound to a (C, H, W) input:
// PyTorch's nn.MaxPool2d(K, S, P) and nn.AvgPool2d(K, S, P) (stride defaults to K).
//   x: (B, C, H, W)  y: (B, C, OH, OW)
#include "checks.hpp"
#include "../backend/pool.hpp"
#include "layer.hpp"

namespace etnn::nn {

template <ShapeType In, class Kind, int Kernel, int Stride, int Pad, int Index>
struct PoolLayer : ParameterFree {
  static_assert(check::image_input<In>());
  static_assert(check::window_params<Kernel, Stride, Pad>());
  static_assert(check::pool_padding<Kernel, Pad>());
  static_assert(check::window_fits<dim_or_one<In>(1), Kernel, Pad>());
  static_assert(check::window_fits<dim_or_one<In>(2), Kernel, Pad>());
  using geometry = expr::Window<dim_or_one<In>(0), dim_or_one<In>(1), dim_or_one<In>(2), Kernel, Stride, Pad>;

  using in_shape = In;
  using out_shape = Shape<geometry::channels, geometry::out_height, geometry::out_width>;
  static constexpr int module_index = Index;
  static constexpr std::size_t saved_per_sample = 0;
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = false;
  static constexpr bool cuda_kernels = true;  // cuda/pool.hpp

  template <class T, class Device>
  static void forward(Device device, const Pass<T>&, const T*, const T* x, T* y, T*, int batch) {
    pool2d_forward<geometry>(device, Kind{}, x, y, batch);
  }

  template <class T, class Device>
  static void backward(Device device, const Pass<T>&, const T*, T*, const T* x, const T* y, const T*, T* dy, T* dx,
                       int batch) {
    pool2d_backward<geometry>(device, Kind{}, x, y, dy, dx, batch);
  }
};

}  // namespace etnn::nn
