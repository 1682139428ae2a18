#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// The steps fused after a GEMM (dense and convolution layers), on the CPU.
//   forward:  z = GEMM + b, y = f(z) in place, keeping f'(z) when f' needs z (`kept`, laid out
//             like y; fn::activate); run by the GEMM on each block of its result while that block
//             is in cache
//   backward: dz = dy (.) f'(z, y) over dy in place, f'(z) read from `kept` where forward kept it;
//             or run by the dX product of the layer above on each block of it (ActivationGradient)
#include <cstddef>
#include <type_traits>

#include "../expr/functors.hpp"

namespace etnn::cpu {

// Which index of the GEMM's result the bias follows: its columns (dense: (B, Out)) or its rows
// (convolution: (Out, pixels) per sample).
enum class BiasAlong { columns, rows };

// The forward epilogue over a block [r0, r1) x [c0, c1) of a row-major (rows, ld) result y, and
// of kept laid out alike (null when f' reads y only, or in inference).
template <BiasAlong Along, class Act, class T>
struct BiasActivation {
  T* y;
  T* kept;
  const T* bias;
  std::ptrdiff_t ld;
  Act act;

  // Each case is its own branch-free loop: SSE2 has no masked store, so a conditional one keeps a
  // portable build's loop scalar.
  void operator()(int r0, int r1, int c0, int c1) const noexcept {
    for (std::ptrdiff_t r = r0; r < r1; ++r) {
      T* row = y + r * ld;
      if constexpr (std::is_same_v<Act, fn::Identity>) {
        ETNN_SIMD
        for (std::ptrdiff_t j = c0; j < c1; ++j) row[j] += bias_at(r, j);
      } else if (kept != nullptr) {
        T* kept_row = kept + r * ld;
        ETNN_SIMD
        for (std::ptrdiff_t j = c0; j < c1; ++j) row[j] = fn::activate(act, row[j] + bias_at(r, j), kept_row + j);
      } else {
        ETNN_SIMD
        for (std::ptrdiff_t j = c0; j < c1; ++j) row[j] = act(row[j] + bias_at(r, j));
      }
    }
  }

 private:
  T bias_at(std::ptrdiff_t r, std::ptrdiff_t j) const noexcept { return Along == BiasAlong::columns ? bias[j] : bias[r]; }
};

// The epilogue of a dX product whose rows are the gradient at the outputs y of a fused activation
// below (two dense layers in a row): dx = dx (.) f'(z, y) over a block, y and kept (what that
// layer's forward kept, or null) laid out like dx.
template <class Act, class T>
struct ActivationGradient {
  T* dx;
  const T* y;
  const T* kept;
  std::ptrdiff_t ld;
  Act act;

  void operator()(int r0, int r1, int c0, int c1) const noexcept {
    for (std::ptrdiff_t r = r0; r < r1; ++r) {
      T* row = dx + r * ld;
      const T* y_row = y + r * ld;
      const T* kept_row = kept != nullptr ? kept + r * ld : nullptr;
      ETNN_SIMD
      for (std::ptrdiff_t j = c0; j < c1; ++j) row[j] = fn::chain_kept(act, row[j], y_row, kept_row, j);
    }
  }
};

// dy = dy (.) f'(z, y) over n values (a convolution's output for one sample): ActivationGradient
// over one row of n.
template <class Act, class T>
void activation_gradient(T* dy, const T* y, const T* kept, std::size_t n, Act act) {
  if constexpr (!std::is_same_v<Act, fn::Identity>)
    ActivationGradient<Act, T>{dy, y, kept, static_cast<std::ptrdiff_t>(n), act}(0, 1, 0, static_cast<int>(n));
}

}  // namespace etnn::cpu
