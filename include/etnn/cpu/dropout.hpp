#pragma once
// Dropout on the CPU (PyTorch's nn.Dropout(p)): in training mode
//   y = x m / (1 - p),  m_i = [u(seed, i) >= p]      dx = dy m / (1 - p)
// and y = x, dx = dy in eval mode. u is a counter-based uniform in [0, 1): the mask is a function
// of the pass's seed and the element's index, so backward recomputes it (nothing is saved) and
// the mask does not depend on the number of threads. dx may be dy (in place).
#include <cstddef>
#include <cstdint>

#include "../core/device.hpp"
#include "../core/random.hpp"
#include "parallel.hpp"

namespace etnn {

namespace cpu {
constexpr double counter_uniform(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t state = seed + index * 0xD1B54A32D192ED03ull;
  return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
}
}  // namespace cpu

// out = in (.) m / (1 - p) over n values (forward: in = x; backward: in = dy).
template <class T>
void dropout_apply(Cpu, double p, std::uint64_t seed, const T* in, T* out, std::size_t n, bool training) {
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  cpu::parallel_chunks(n, 1024, 4, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i)
      out[i] = !training ? in[i] : cpu::counter_uniform(seed, i) >= p ? in[i] * scale : T(0);
  });
}

}  // namespace etnn
