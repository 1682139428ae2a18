#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// nn::conv2d<Out, K, stride<S>, pad<P>> bound to a (C, H, W) input, optionally fused with the
// activation that follows it: PyTorch's nn.Conv2d(C, Out, K, stride=S, padding=P).
//   y = f(conv(x, W) + b)   x: (B, C, H, W)  W: (Out, C, K, K)  b: (Out)  y: (B, Out, OH, OW)
#include <cstddef>
#include <type_traits>

#include "checks.hpp"
#include "../backend/conv.hpp"
#include "init.hpp"
#include "layer.hpp"

namespace etnn::nn {

template <ShapeType In, int Out, int Kernel, int Stride, int Pad, class Act, int Index>
struct ConvLayer {
  static_assert(check::image_input<In>());
  static_assert(check::positive_width<Out>());
  static_assert(check::window_params<Kernel, Stride, Pad>());
  static_assert(check::window_fits<dim_or_one<In>(1), Kernel, Pad>());
  static_assert(check::window_fits<dim_or_one<In>(2), Kernel, Pad>());
  using geometry = expr::Window<dim_or_one<In>(0), dim_or_one<In>(1), dim_or_one<In>(2), Kernel, Stride, Pad>;
  static constexpr int channels = geometry::channels;
  static constexpr std::size_t fan_in = std::size_t{channels} * Kernel * Kernel;
  static constexpr std::size_t weight_size = Out * fan_in;

  using in_shape = In;
  using out_shape = Shape<Out, geometry::out_height, geometry::out_width>;
  using activation = Act;
  static constexpr int module_index = Index;
  static constexpr std::array<ParamInfo, 2> params = aligned_layout<2>({{
      {"weight", 4, {Out, channels, Kernel, Kernel}, 0},
      {"bias", 1, {Out, 0, 0, 0}, 0},
  }});
  static constexpr std::size_t num_params = slice_values(params);
  static constexpr std::size_t saved_per_sample = Act::derivative_needs_input ? out_shape::size : 0;
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = false;
  static constexpr bool cuda_kernels = true;  // cuda/conv.hpp
  // On a GPU the im2col columns of every sample of the batch (one GEMM over all of them); on the
  // CPU, which converts one image at a time into a buffer of each thread's own, the partial sums
  // of the weight gradient's sample groups (cpu/conv.hpp).
  template <class Device>
  static constexpr std::size_t scratch_values(int batch) {
    if constexpr (std::is_same_v<Device, Cuda>) return static_cast<std::size_t>(batch) * fan_in * geometry::out_pixels;
    else return conv2d_scratch_values<geometry, Out>(Cpu{}, batch);
  }

  template <class T>
  static void init(T* p, Rng& rng) {
    init_fan_in_uniform(p, weight_size, fan_in, rng);
    init_fan_in_uniform(p + params[1].offset, params[1].numel(), fan_in, rng);
  }

  template <class T, class Device>
  static void forward(Device device, const Pass<T>& pass, const T* p, const T* x, T* y, T* saved, int batch) {
    conv2d_forward<geometry, Out>(device, p, p + params[1].offset, x, y, saved, pass.scratch, batch, Act{});
  }

  template <class T, class Device>
  static void backward(Device device, const Pass<T>& pass, const T* p, T* g, const T* x, const T* y,
                       const T* saved, T* dy, T* dx, int batch) {
    conv2d_backward<geometry, Out>(device, p, g, g + params[1].offset, x, y, saved, dy, dx, pass.scratch, batch, Act{});
  }
};

}  // namespace etnn::nn
