#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// Reductions the optimizer needs, on the device, and the memory device reductions leave their
// results in. Results are the same whatever the launch: sums go through a fixed number of block
// partials added on the host in order (the index searches of cuda/non_finite.hpp take a maximum
// or minimum).
#include <cmath>
#include <cstddef>

#include "../core/device.hpp"
#include "../tensor/buffer.hpp"
#include "memory.hpp"
#include "per_thread.hpp"
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
  for (const std::size_t i : grid_stride(n))
    sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  store_block_sum(sum, partial);
}

// Device memory for the partial sums above and for the result of an index search (the non-finite
// scan, cuda/non_finite.hpp; a loss's domain check), allocated once per host thread (per_thread.hpp):
// a launch's results are read back before that thread's next launch overwrites them.
// found_input: a loss's input check left on the device (cuda/input_check.hpp), read by the
// non-finite guard's verdict, launched after that thread's backward and before its next loss.
struct ReductionScratch {
  Buffer<double, Cuda> partials{reduction_blocks};
  Buffer<unsigned long long, Cuda> index{1};
  Buffer<unsigned long long, Cuda> found_input{3};
};
inline double* reduction_partials() { return per_thread<ReductionScratch>().partials.data(); }
inline unsigned long long* reduction_index() { return per_thread<ReductionScratch>().index.data(); }
inline unsigned long long* reduction_found_input() { return per_thread<ReductionScratch>().found_input.data(); }

// sum_i x[i]^2 in double (the global gradient norm).
template <class T>
double sum_of_squares(const T* x, std::size_t n) {
  if (n == 0) return 0.0;
  double* partial = reduction_partials();
  launch("etnn::optim sum_of_squares", sum_of_squares_kernel<T>, {reduction_blocks, reduction_threads}, x, n, partial);
  return sum_of_partials(partial);
}

}  // namespace cuda::detail
}  // namespace etnn
