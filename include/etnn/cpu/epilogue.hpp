#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// The steps fused after a GEMM (dense and convolution layers), on the CPU.
//   forward:  z = GEMM + b, y = f(z) in place, keeping z when f' needs its input (z_saved not null);
//             run by the GEMM on each block of its result while that block is in cache
//   backward: dz = dy (.) f'(z, y) over dy in place
#include <cstddef>
#include <type_traits>

#include "../expr/functors.hpp"

namespace etnn::cpu {

// Which index of the GEMM's result the bias follows: its columns (dense: (B, Out)) or its rows
// (convolution: (Out, pixels) per sample).
enum class BiasAlong { columns, rows };

// The forward epilogue over a block [r0, r1) x [c0, c1) of a row-major (rows, ld) result y, and
// of z_saved laid out alike.
template <BiasAlong Along, class Act, class T>
struct BiasActivation {
  T* y;
  T* z_saved;
  const T* bias;
  std::ptrdiff_t ld;
  Act act;

  void operator()(int r0, int r1, int c0, int c1) const noexcept {
    for (std::ptrdiff_t r = r0; r < r1; ++r) {
      T* row = y + r * ld;
      T* z_row = z_saved != nullptr ? z_saved + r * ld : nullptr;
      ETNN_SIMD
      for (std::ptrdiff_t j = c0; j < c1; ++j) {
        const T z = row[j] + (Along == BiasAlong::columns ? bias[j] : bias[r]);
        if constexpr (!std::is_same_v<Act, fn::Identity>) {
          if (z_row != nullptr) z_row[j] = z;
          row[j] = act(z);
        } else {
          row[j] = z;
        }
      }
    }
  }
};

template <class Act, class T>
void activation_gradient(T* dy, const T* y, const T* z_saved, std::size_t n, Act act) {
  if constexpr (!std::is_same_v<Act, fn::Identity>) {
    ETNN_SIMD
    for (std::size_t i = 0; i < n; ++i) dy[i] *= act.derivative(z_saved != nullptr ? z_saved[i] : y[i], y[i]);
  }
}

}  // namespace etnn::cpu
