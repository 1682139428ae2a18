#pragma once
// Private to cuda/fused_mlp.hpp: the fused kernels at a network's own widths, PaddedFusedMlp<Half,
// Widths...>. Widths other than 16, 32, 64 and 128 are padded with zeros to the next of them
// (expr/fused_mlp_padding.hpp says why the padded network computes the true one): the parameters,
// the input and the output gradient are copied into padded buffers first, and the output and the
// parameter gradients copied back, by the copy kernels below (grid-stride loops over the elements
// written, on etnn's stream). Widths that need no padding run FusedMlp directly.
//
// The scratch (scratch_floats(batch) floats, 256-byte aligned) holds the kernels' `saved` first,
// then when padded each region on a 256-byte boundary:
//   saved | padded params | their gradients | x (batch, P_0) | y (batch, P_L) | dy (batch, P_L)
#include <cuda_runtime.h>

#include <cstddef>

#include "../../expr/fused_mlp_padding.hpp"
#include "../runtime.hpp"
#include "host.hpp"

namespace etnn::cuda {

namespace detail::fused_mlp {

// padded[j] = the true parameter at padded index j, 0 where j is padding.
template <class Padding>
__global__ void pad_parameters_kernel(const float* params, float* padded) {
  for (const std::size_t j : grid_stride(Padding::padded_params)) {
    const std::size_t i = Padding::true_index(j);
    padded[j] = i < Padding::num_params ? params[i] : 0.0f;
  }
}
// grads[i] += padded_grads[padded index of i] for every true parameter i (not between tensors).
template <class Padding>
__global__ void add_true_gradients_kernel(const float* padded_grads, float* grads) {
  for (const std::size_t i : grid_stride(Padding::num_params)) {
    const std::size_t j = Padding::padded_index(i);
    if (j < Padding::padded_params) grads[i] += padded_grads[j];
  }
}
// to (rows, to_cols) = from (rows, from_cols), columns padded with zeros or dropped; n = rows to_cols.
// A template, as every kernel of a header-only library must be to be defined in many translation
// units (nvcc ignores `inline` on __global__ functions, warning 20050).
template <class T>
__global__ void copy_columns_kernel(const T* from, int from_cols, T* to, int to_cols, std::size_t n) {
  for (const std::size_t index : grid_stride(n))
    to[index] = expr::detail::column_copy_element(from, from_cols, to_cols, index);
}

// (rows, from_cols) -> (rows, to_cols), columns padded with zeros or dropped.
inline void copy_columns(const float* from, int from_cols, float* to, int to_cols, int rows) {
  const std::size_t n = std::size_t(rows) * std::size_t(to_cols);
  if (n == 0) return;
  launch("etnn fused MLP copy_columns_kernel", copy_columns_kernel<float>, {grid_blocks(n), 256}, from, from_cols, to,
         to_cols, n);
}

}  // namespace detail::fused_mlp

// The fused MLP of true widths Widths = {w_0 (input), ..., w_L (output)}, each at most 128, with
// Half (__nv_bfloat16 or __half) operands and Act between the layers: forward and backward as
// FusedMlp's, on etnn's stream.
template <class Half, class Act, int... Widths>
struct PaddedFusedMlp {
  using padding = expr::detail::PaddedMlp<Widths...>;
  using kernels = FusedMlp<Half, Act, expr::detail::fused_width(Widths)...>;  // checks the widths
  static constexpr int widths[] = {Widths...};
  static constexpr int in_width = widths[0];
  static constexpr int out_width = widths[sizeof...(Widths) - 1];
  static constexpr int padded_in = expr::detail::fused_width(in_width);
  static constexpr int padded_out = expr::detail::fused_width(out_width);

  // Floats of scratch at this batch.
  static std::size_t scratch_floats(int batch) { return regions(nullptr, batch).floats; }

  // x (batch, w_0) -> y (batch, w_L), fp32 row-major; keeps in `scratch` what backward needs.
  static void forward(const float* params, const float* x, float* y, float* scratch, int batch) {
    const Regions r = regions(scratch, batch);
    if constexpr (padding::needed) {
      constexpr std::size_t n = padding::padded_params;
      launch("etnn fused MLP pad_parameters_kernel", detail::fused_mlp::pad_parameters_kernel<padding>,
             {grid_blocks(n), 256}, params, r.params);
      detail::fused_mlp::copy_columns(x, in_width, r.x, padded_in, batch);
      kernels::forward(r.params, r.x, r.y, r.saved, batch, stream());
      detail::fused_mlp::copy_columns(r.y, padded_out, y, out_width, batch);
    } else {
      kernels::forward(params, x, y, r.saved, batch, stream());
    }
  }

  // grads += dL/dparams for the output gradient dy (batch, w_L), after forward on the same x and
  // scratch (forward left the padded parameters and input there); dx (batch, w_0) = dL/dx unless
  // it is null (the padded input's gradient with its padded columns dropped: they meet zero weights).
  static void backward(const float* params, float* grads, const float* x, const float* dy, float* scratch,
                       int batch, float* dx = nullptr) {
    const Regions r = regions(scratch, batch);
    if constexpr (padding::needed) {
      detail::fused_mlp::copy_columns(dy, out_width, r.dy, padded_out, batch);
      ETNN_CHECK_CUDA(runtime().cudaMemsetAsync(r.grads, 0, padding::padded_params * sizeof(float), stream()));
      kernels::backward(r.params, r.grads, r.x, r.saved, r.dy, batch, stream(), dx != nullptr ? r.dx : nullptr);
      constexpr std::size_t n = padding::num_params;
      launch("etnn fused MLP add_true_gradients_kernel", detail::fused_mlp::add_true_gradients_kernel<padding>,
             {grid_blocks(n), 256}, r.grads, grads);
      if (dx != nullptr) detail::fused_mlp::copy_columns(r.dx, padded_in, dx, in_width, batch);
    } else {
      kernels::backward(params, grads, x, r.saved, dy, batch, stream(), dx);
    }
  }

 private:
  // The scratch's regions (unused ones null).
  struct Regions {
    void* saved;
    float* params;  // padded_params, the padded parameters
    float* grads;   // padded_params, their gradients
    float* x;       // (batch, padded_in)
    float* y;       // (batch, padded_out)
    float* dy;      // (batch, padded_out)
    float* dx;      // (batch, padded_in)
    std::size_t floats;
  };
  static Regions regions(float* scratch, int batch) {
    constexpr std::size_t align = 256 / sizeof(float);
    std::size_t at = 0;
    const auto take = [&](std::size_t floats) {
      float* region = scratch == nullptr ? nullptr : scratch + at;
      at += (floats + align - 1) / align * align;
      return region;
    };
    const auto rows = static_cast<std::size_t>(batch);
    Regions r{};
    r.saved = take((kernels::saved_bytes(batch) + sizeof(float) - 1) / sizeof(float));
    if constexpr (padding::needed) {
      r.params = take(padding::padded_params);
      r.grads = take(padding::padded_params);
      r.x = take(rows * padded_in);
      r.y = take(rows * padded_out);
      r.dy = take(rows * padded_out);
      r.dx = take(rows * padded_in);
    }
    r.floats = at;
    return r;
  }
};

}  // namespace etnn::cuda
