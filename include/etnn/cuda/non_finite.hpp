#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// The CUDA scan behind the non-finite guard: where a device buffer holds a NaN or an infinity, as
// the maximum (or minimum) index found, the same whatever the launch.
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "../core/device.hpp"
#include "memory.hpp"
#include "reduce.hpp"
#include "runtime.hpp"

namespace etnn::cuda::detail {

// found = max over non-finite x[i], i in [begin, end), of i + 1 (found starts at 0), or the
// minimum of i (found starts at the largest value, "none") when `first`.
template <class T>
__global__ void non_finite_index_kernel(const T* x, std::size_t begin, std::size_t end, bool first,
                                        unsigned long long* found) {
  for (const std::size_t i : grid_stride(begin, end)) {
    if (!isfinite(x[i])) {
      if (first)
        atomicMin(found, static_cast<unsigned long long>(i));
      else
        atomicMax(found, static_cast<unsigned long long>(i + 1));
    }
  }
}

template <class T>
std::size_t search_non_finite(const T* x, std::size_t begin, std::size_t end, bool first) {
  if (begin >= end) return first ? end : 0;
  unsigned long long* on_device = reduction_index();
  // The start value set on the device (all bits for the minimum, zero for the maximum): no host
  // value to send.
  ETNN_CHECK_CUDA(runtime().cudaMemsetAsync(on_device, first ? 0xFF : 0, sizeof *on_device, stream()));
  launch("etnn::optim non_finite_index", non_finite_index_kernel<T>, {grid_blocks(end - begin), 256}, x, begin, end,
         first, on_device);
  unsigned long long found = 0;
  copy_to_host(Cuda{}, &found, on_device, 1);
  return first ? static_cast<std::size_t>(std::min<unsigned long long>(found, end)) : static_cast<std::size_t>(found);
}

// The last i < n with x[i] NaN or infinite; n when there is none.
template <class T>
std::size_t last_non_finite(const T* x, std::size_t n) {
  const std::size_t last_plus_one = search_non_finite(x, 0, n, false);
  return last_plus_one == 0 ? n : last_plus_one - 1;
}

// The first i in [begin, end) with x[i] NaN or infinite; end when there is none.
template <class T>
std::size_t first_non_finite(const T* x, std::size_t begin, std::size_t end) {
  return search_non_finite(x, begin, end, true);
}

}  // namespace etnn::cuda::detail
