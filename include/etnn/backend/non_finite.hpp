#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// Where a buffer holds a NaN or an infinity, on the buffer's device: the non-finite guard's scan,
// cpu/non_finite.hpp on the host and, under nvcc, cuda/non_finite.hpp on the GPU.
#include <cstddef>

#include "../core/device.hpp"
#include "../cpu/non_finite.hpp"
#if defined(__CUDACC__)
#include "../cuda/non_finite.hpp"
#endif

namespace etnn::backend {

// The largest i < n with x[i] NaN or infinite; n when every value is finite.
template <class T>
std::size_t last_non_finite(Cpu, const T* x, std::size_t n) {
  return cpu::detail::last_non_finite(x, n);
}

// The first i in [begin, end) with x[i] NaN or infinite; end when there is none.
template <class T>
std::size_t first_non_finite(Cpu, const T* x, std::size_t begin, std::size_t end) {
  return cpu::detail::first_non_finite(x, begin, end);
}

#if defined(__CUDACC__)
template <class T>
std::size_t last_non_finite(Cuda, const T* x, std::size_t n) {
  return cuda::detail::last_non_finite(x, n);
}

template <class T>
std::size_t first_non_finite(Cuda, const T* x, std::size_t begin, std::size_t end) {
  return cuda::detail::first_non_finite(x, begin, end);
}
#endif

}  // namespace etnn::backend
