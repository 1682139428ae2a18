#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// The activation step fused after a GEMM (dense and convolution layers), on the CPU.
//   forward:  y = f(z) over z in place, keeping z when f' needs its input (z_saved not null)
//   backward: dz = dy (.) f'(z, y) over dy in place
#include <cstddef>
#include <type_traits>

#include "../expr/functors.hpp"

namespace etnn::cpu {

template <class Act, class T>
void activation_epilogue(T* y, T* z_saved, std::size_t n, Act act) {
  if constexpr (!std::is_same_v<Act, fn::Identity>) {
    for (std::size_t i = 0; i < n; ++i) {
      if (z_saved != nullptr) z_saved[i] = y[i];
      y[i] = act(y[i]);
    }
  }
}

template <class Act, class T>
void activation_gradient(T* dy, const T* y, const T* z_saved, std::size_t n, Act act) {
  if constexpr (!std::is_same_v<Act, fn::Identity>) {
    for (std::size_t i = 0; i < n; ++i) dy[i] *= act.derivative(z_saved != nullptr ? z_saved[i] : y[i], y[i]);
  }
}

}  // namespace etnn::cpu
