#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// Fully connected layer with a fused activation, on the CPU.
//
// Forward:   Z = X W^T + b,  Y = f(Z)          X: (B, IN)  W: (OUT, IN)  b: (OUT)  Y, Z: (B, OUT)
//            one GEMM writes X W^T into Y and, block by block while it is in cache, adds b and
//            applies f (keeping f'(Z) only when f' needs Z and backward will run: `kept`).
// Backward:  dZ = dY (.) f'(Z, Y)   written over dY,  db += sum_b dZ      one pass
//            dW += dZ^T X                                                  GEMM
//            dX  = dZ W                                                    GEMM, skipped for the first layer
// Gradients accumulate (+=) so that micro-batches can be summed, or with Accumulate::no are
// written (=: the first micro-batch of a step, without a pass zeroing them first).
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "../core/device.hpp"
#include "../expr/functors.hpp"
#include "epilogue.hpp"
#include "executor.hpp"
#include "gemm.hpp"
#include "parallel.hpp"

namespace etnn {

template <int In, int Out, class Act, class T>
void dense_forward(Cpu, const T* weight, const T* bias, const T* x, T* y, T* kept, int batch, Act act) {
  // Y = f(X W^T + b): W^T is W read column-major.
  cpu::gemm<cpu::Layout::row_major, cpu::Layout::col_major>(
      cpu::Accumulate::no, batch, Out, In, x, In, weight, In, y, Out,
      cpu::BiasActivation<cpu::BiasAlong::columns, Act, T>{y, kept, bias, Out, act});
}

template <int In, int Out, class Act, class T>
void dense_backward(Cpu, const T* weight, T* weight_grad, T* bias_grad, const T* x, const T* y, const T* kept,
                    T* dy, T* dx, int batch, Act act, cpu::Accumulate gradients = cpu::Accumulate::yes) {
  // dZ = dY (.) f'(Z, Y) and db += column sums, in one pass. Threads own disjoint column ranges,
  // so the bias reduction needs no atomics and sums each column in a fixed order.
  cpu::parallel_chunks(static_cast<std::size_t>(Out), 16, static_cast<std::size_t>(batch),
                       [=](std::size_t begin, std::size_t end) {
    if (gradients == cpu::Accumulate::no) std::fill(bias_grad + begin, bias_grad + end, T(0));
    for (int r = 0; r < batch; ++r) {
      const std::size_t row = static_cast<std::size_t>(r) * Out;
      T* dz_row = dy + row;
      const T* y_row = y + row;
      const T* kept_row = kept != nullptr ? kept + row : nullptr;
      ETNN_SIMD
      for (std::size_t j = begin; j < end; ++j) {
        T g = dz_row[j];
        if constexpr (!std::is_same_v<Act, fn::Identity>) {
          g = fn::chain_kept(act, g, y_row, kept_row, j);
          dz_row[j] = g;
        }
        bias_grad[j] += g;
      }
    }
  });
  // dW (+)= dZ^T X: dZ^T is dZ read column-major.
  cpu::gemm<cpu::Layout::col_major, cpu::Layout::row_major>(gradients, Out, In, batch, dy, Out, x, In, weight_grad,
                                                            In);
  if (dx != nullptr) {
    // dX = dZ W
    cpu::gemm<cpu::Layout::row_major, cpu::Layout::row_major>(cpu::Accumulate::no, batch, In, Out, dy, Out, weight, In,
                                                              dx, In);
  }
}

}  // namespace etnn
