#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// The CUDA executor: an elementwise expression tree is passed by value into one grid-stride
// kernel, so a whole fused expression is one launch and one pass over memory. The functors are
// the ETNN_HD ones the CPU executor runs (expr/functors.hpp), so both devices compute the same math.
#include <cstddef>

#include "../core/device.hpp"
#include "../expr/checks.hpp"
#include "../expr/expression.hpp"
#include "runtime.hpp"

namespace etnn {

namespace cuda::detail {

template <class T, class E>
__global__ void assign_kernel(T* dst, E e, std::size_t n) {
  for (const std::size_t i : grid_stride(n))
    dst[i] = e[i];
}

template <class T>
__global__ void fill_kernel(T* dst, std::size_t n, T value) {
  for (const std::size_t i : grid_stride(n))
    dst[i] = value;
}

template <class F>
__global__ void for_each_index_kernel(std::size_t n, F f) {
  for (const std::size_t i : grid_stride(n))
    f(i);
}

}  // namespace cuda::detail

// dst[i] = e[i] for i < e.size(), on the device. dst may alias an operand read at the same index.
template <class T, expr::Expression E>
void assign(Cuda, T* dst, const E& e) {
  static_assert(expr::check::sized_expression<E::sized>());
  const std::size_t n = e.size();
  if (n == 0) return;
  cuda::launch("etnn::assign", cuda::detail::assign_kernel<T, E>, {cuda::grid_blocks(n), 256}, dst, e, n);
}

// dst[i] = value for i < n, on the device.
template <class T>
void fill(Cuda, T* dst, std::size_t n, T value) {
  if (n == 0) return;
  cuda::launch("etnn::fill", cuda::detail::fill_kernel<T>, {cuda::grid_blocks(n), 256}, dst, n, value);
}

// f(i) for i < n, on the device; f is an ETNN_HD functor (an optimizer's update rule), copied
// by value into the kernel.
template <class F>
void for_each_index(Cuda, std::size_t n, const F& f) {
  if (n == 0) return;
  cuda::launch("etnn::for_each_index", cuda::detail::for_each_index_kernel<F>, {cuda::grid_blocks(n), 256}, n, f);
}

// With a cost per index, which is the host's hint (cpu/executor.hpp): each index in one device thread
// all the same. For row functors adjacent threads read rows a row apart, which suits the narrow
// rows they are for (softmax over classes, a sample's layer norm).
template <class F>
void for_each_index(Cuda, std::size_t n, std::size_t, const F& f) {
  for_each_index(Cuda{}, n, f);
}

}  // namespace etnn
