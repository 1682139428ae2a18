#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// sum_i x_i^2 in double, on the buffer's device: cpu/sum_of_squares.hpp on the host and, under nvcc,
// cuda/reduce.hpp on the GPU (the global gradient norm of clipping, optim/grad_norm.hpp).
#include <cstddef>

#include "../core/device.hpp"
#include "../cpu/sum_of_squares.hpp"
#if defined(__CUDACC__)
#include "../cuda/reduce.hpp"
#endif

namespace etnn::backend {

template <class T>
double sum_of_squares(Cpu, const T* x, std::size_t n) {
  return cpu::detail::sum_of_squares(x, n);
}

#if defined(__CUDACC__)
template <class T>
double sum_of_squares(Cuda, const T* x, std::size_t n) {
  return cuda::detail::sum_of_squares(x, n);
}
#endif

}  // namespace etnn::backend
