#pragma once
// Reductions the optimizer and the non-finite guard need, on the device. Results are the same
// whatever the launch: sums go through a fixed number of block partials added on the host in
// order, and index searches take a maximum or minimum.
#include <cmath>
#include <cstddef>

#include "../core/device.hpp"
#include "../tensor/buffer.hpp"
#include "memory.hpp"
#include "runtime.hpp"

namespace etnn {

namespace cuda::detail {

inline constexpr unsigned reduction_blocks = 256;
inline constexpr unsigned reduction_threads = 256;

// The sum of every thread's `sum` in the block (reduction_threads of them), in a fixed tree
// order; the result is thread 0's. Every thread of the block must call it.
__device__ inline double block_sum(double sum) {
  __shared__ double lane[reduction_threads];
  lane[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) lane[threadIdx.x] += lane[threadIdx.x + half];
    __syncthreads();
  }
  return lane[0];
}

// partial[blockIdx.x] = block_sum(sum).
__device__ inline void store_block_sum(double sum, double* partial) {
  const double total = block_sum(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// The sum of a launch's block partials, added on the host in block order.
inline double sum_of_partials(const double* partial) {
  double host[reduction_blocks];
  copy_to_host(Cuda{}, host, partial, reduction_blocks);
  double total = 0.0;
  for (double p : host) total += p;
  return total;
}

// partial[block] = sum of x[i]^2 over the block's grid-stride share, in double.
template <class T>
__global__ void sum_of_squares_kernel(const T* x, std::size_t n, double* partial) {
  double sum = 0.0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  store_block_sum(sum, partial);
}

// found = max over non-finite x[i], i in [begin, end), of i + 1 (found starts at 0), or the
// minimum of i (found starts at end) when `first`.
template <class T>
__global__ void non_finite_index_kernel(const T* x, std::size_t begin, std::size_t end, bool first,
                                        unsigned long long* found) {
  for (std::size_t i = begin + blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < end;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (!isfinite(x[i])) {
      if (first)
        atomicMin(found, static_cast<unsigned long long>(i));
      else
        atomicMax(found, static_cast<unsigned long long>(i + 1));
    }
  }
}

// Device memory for the partial results above, allocated once per process.
inline double* reduction_partials() {
  static Buffer<double, Cuda> partials(reduction_blocks);
  return partials.data();
}
inline unsigned long long* reduction_index() {
  static Buffer<unsigned long long, Cuda> index(1);
  return index.data();
}

inline std::size_t search_non_finite(auto* x, std::size_t begin, std::size_t end, bool first) {
  if (begin >= end) return first ? end : 0;
  unsigned long long found = first ? end : 0;
  unsigned long long* on_device = reduction_index();
  ETNN_CHECK_CUDA(cudaMemcpyAsync(on_device, &found, sizeof found, cudaMemcpyHostToDevice, stream()));
  non_finite_index_kernel<<<grid_blocks(end - begin), 256, 0, stream()>>>(x, begin, end, first, on_device);
  check_launch("etnn::optim non_finite_index");
  copy_to_host(Cuda{}, &found, on_device, 1);
  return static_cast<std::size_t>(found);
}

}  // namespace cuda::detail

namespace optim::detail {

// sum_i x[i]^2 in double (the global gradient norm).
template <class T>
double sum_of_squares(Cuda, const T* x, std::size_t n) {
  if (n == 0) return 0.0;
  double* partial = cuda::detail::reduction_partials();
  cuda::detail::sum_of_squares_kernel<<<cuda::detail::reduction_blocks, cuda::detail::reduction_threads, 0,
                                        cuda::stream()>>>(x, n, partial);
  cuda::check_launch("etnn::optim sum_of_squares");
  return cuda::detail::sum_of_partials(partial);
}

// The last i < n with x[i] NaN or infinite; n when there is none.
template <class T>
std::size_t last_non_finite(Cuda, const T* x, std::size_t n) {
  const std::size_t last_plus_one = cuda::detail::search_non_finite(x, 0, n, false);
  return last_plus_one == 0 ? n : last_plus_one - 1;
}

// The first i in [begin, end) with x[i] NaN or infinite; end when there is none.
template <class T>
std::size_t first_non_finite(Cuda, const T* x, std::size_t begin, std::size_t end) {
  return cuda::detail::search_non_finite(x, begin, end, true);
}

}  // namespace optim::detail
}  // namespace etnn
