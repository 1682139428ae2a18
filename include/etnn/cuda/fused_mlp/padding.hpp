#pragma once
// Private to cuda/fused_mlp.hpp: the copies around a fused MLP run at padded widths
// (nn/fused_mlp_program.hpp): the parameters into the padded layout, the true parameters'
// gradients out of it, and the columns of a row-major matrix padded with zeros or dropped. One
// thread per element written, on the stream given.
//
// The layouts come from the caller, so that this file needs nothing of nn/:
//   Padding (nn::detail::PaddedMlp): std::size_t constants num_params and padded_params, and the
//     ETNN_HD index maps padded_index(i) (true -> padded) and true_index(j) (padded -> true, or
//     num_params where j is padding);
//   ColumnCopy: ETNN_HD static float element(const float* from, int from_cols, int to_cols,
//     std::size_t index), element `index` of the (rows, to_cols) copy of a (rows, from_cols) matrix
//     (nn::detail::column_copy_element).
#include <cuda_runtime.h>

#include <cstddef>

#include "../runtime.hpp"

namespace etnn::cuda::detail {

template <class Padding>
__global__ void pad_parameters_kernel(const float* params, float* padded) {
  const std::size_t j = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= Padding::padded_params) return;
  const std::size_t i = Padding::true_index(j);
  padded[j] = i < Padding::num_params ? params[i] : 0.0f;
}
template <class Padding>
__global__ void add_true_gradients_kernel(const float* padded_grads, float* grads) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < Padding::num_params) grads[i] += padded_grads[Padding::padded_index(i)];
}
template <class ColumnCopy>
__global__ void copy_columns_kernel(const float* from, int from_cols, float* to, int to_cols, std::size_t n) {
  const std::size_t index = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index < n) to[index] = ColumnCopy::element(from, from_cols, to_cols, index);
}

// padded (Padding::padded_params) = params (Padding::num_params) in the padded layout, zeros
// where it is padding.
template <class Padding>
void pad_parameters(const float* params, float* padded, cudaStream_t stream) {
  constexpr std::size_t n = Padding::padded_params;
  pad_parameters_kernel<Padding><<<grid_blocks(n), 256, 0, stream>>>(params, padded);
  check_launch("etnn fused MLP pad_parameters_kernel");
}

// grads (Padding::num_params) += the true parameters' entries of padded_grads (padded layout).
template <class Padding>
void add_true_gradients(const float* padded_grads, float* grads, cudaStream_t stream) {
  constexpr std::size_t n = Padding::num_params;
  add_true_gradients_kernel<Padding><<<grid_blocks(n), 256, 0, stream>>>(padded_grads, grads);
  check_launch("etnn fused MLP add_true_gradients_kernel");
}

// (rows, from_cols) -> (rows, to_cols), columns padded with zeros or dropped.
template <class ColumnCopy>
void copy_columns(const float* from, int from_cols, float* to, int to_cols, int rows, cudaStream_t stream) {
  const std::size_t n = std::size_t(rows) * std::size_t(to_cols);
  if (n == 0) return;
  copy_columns_kernel<ColumnCopy><<<grid_blocks(n), 256, 0, stream>>>(from, from_cols, to, to_cols, n);
  check_launch("etnn fused MLP copy_columns_kernel");
}

}  // namespace etnn::cuda::detail
