#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// nn::batch_norm bound to its input: PyTorch's nn.BatchNorm1d(C) after a linear layer (input (C)
// or (C, L)) and nn.BatchNorm2d(C) after a convolution (input (C, H, W)); C is the first dimension.
// Parameters weight = 1, bias = 0; buffers running_mean = 0, running_var = 1, num_batches_tracked.
// In a data-parallel Trainer with sync_batch_norm, batch statistics cover every rank's batch
// (PyTorch's nn.SyncBatchNorm); otherwise each rank's own (DDP's default).
#include <algorithm>

#include "../backend/batch_norm.hpp"
#include "layer.hpp"

namespace etnn::nn {

template <ShapeType In, int Index>
struct BatchNormLayer {
  static constexpr int channels = In::dims[0];
  static constexpr int spatial = static_cast<int>(In::size) / channels;

  using in_shape = In;
  using out_shape = In;
  static constexpr int module_index = Index;
  static constexpr std::array<ParamInfo, 2> params = aligned_layout<2>({{
      {"weight", 1, {channels, 0, 0, 0}, 0},
      {"bias", 1, {channels, 0, 0, 0}, 0},
  }});
  static constexpr std::size_t num_params = slice_values(params);
  // As the kernels find them (expr::detail::running_var_at).
  static constexpr std::array<ParamInfo, 3> buffers = aligned_layout<3>({{
      {"running_mean", 1, {channels, 0, 0, 0}, 0},
      {"running_var", 1, {channels, 0, 0, 0}, 0},
      {"num_batches_tracked", 0, {0, 0, 0, 0}, 0},
  }});
  static_assert(buffers[1].offset == expr::detail::running_var_at<channels> &&
                buffers[2].offset == expr::detail::batches_tracked_at<channels>);
  static constexpr std::size_t num_buffers = slice_values(buffers);
  static constexpr std::size_t saved_per_sample = 0;
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = true;
  static constexpr bool cuda_kernels = true;  // cuda/batch_norm.hpp

  template <class T>
  static void init(T* p, Rng&) {
    std::fill_n(p, channels, T(1));
    std::fill_n(p + params[1].offset, channels, T(0));
  }
  template <class T>
  static void init_buffers(T* b) {
    std::fill_n(b, channels, T(0));
    std::fill_n(b + buffers[1].offset, channels, T(1));
    b[buffers[2].offset] = T(0);
  }

  template <class T, class Device>
  static void forward(Device device, const Pass<T>& pass, const T* p, const T* x, T* y, T*, int batch) {
    batch_norm_forward<channels, spatial>(device, p, p + params[1].offset, pass.buffers, x, y, batch, pass.training, pass.sync);
  }

  template <class T, class Device>
  static void backward(Device device, const Pass<T>& pass, const T* p, T* g, const T* x, const T*, const T*, T* dy,
                       T* dx, int batch) {
    batch_norm_backward<channels, spatial>(device, p, g, g + params[1].offset, pass.buffers, x, dy, dx, batch, pass.training,
                                           pass.sync);
  }
};

}  // namespace etnn::nn
