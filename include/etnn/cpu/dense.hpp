#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// Fully connected layer with a fused activation, on the CPU.
//
// Forward:   Z = X W^T + b,  Y = f(Z)          X: (B, IN)  W: (OUT, IN)  b: (OUT)  Y, Z: (B, OUT)
//            one GEMM writes X W^T into Y and, block by block while it is in cache, adds b and
//            applies f (keeping f'(Z) only when f' needs Z and backward will run: `kept`).
// Backward:  dZ = dY (.) f'(Z, Y)   written over dY,  db += sum_b dZ      one pass (dZ: the layer
//            above may have applied f' in its dX product's epilogue, ActivationBelow)
//            dW += dZ^T X                                                  GEMM (in row blocks,
//            the last first, each reported final as it completes: WeightBlocks)
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

// The fused activation of the layer below a dense layer (its outputs are this layer's inputs x),
// whose chain step backward applies to dX in the product's epilogue, while each block is in
// cache: kept is what that layer's forward kept (f'(z), or null). The layer below then receives
// dL/dz (dense_backward's dy_is_dz). NoActivationBelow: dX as it is.
template <class Act, class T>
struct ActivationBelow {
  Act act;
  const T* kept;
};
struct NoActivationBelow {};

// dW in blocks of `rows` rows, the last block first, with final_from(offset) called once db is
// done and after each block: the layer's gradients from `offset` on (counted from W's first value;
// db at OUT * IN) are final, and a data-parallel step may start reducing them. rows = 0: one
// product, nothing reported. Rows are independent dot products over the batch: the same bits.
template <class FinalFrom>
struct WeightBlocks {
  int rows = 0;
  FinalFrom final_from;
};
struct NoBlockReport {
  void operator()(std::size_t) const noexcept {}
};

template <int In, int Out, class Act, class T, class Below = NoActivationBelow, class FinalFrom = NoBlockReport>
void dense_backward(Cpu, const T* weight, T* weight_grad, T* bias_grad, const T* x, const T* y, const T* kept,
                    T* dy, T* dx, int batch, Act act, cpu::Accumulate gradients = cpu::Accumulate::yes,
                    bool dy_is_dz = false, Below below = {}, WeightBlocks<FinalFrom> blocks = {}) {
  // dZ = dY (.) f'(Z, Y) (unless the layer above did it: dy_is_dz) and db += column sums, in one
  // pass. Threads own disjoint column ranges, so the bias reduction needs no atomics and sums
  // each column in a fixed order.
  const bool chain = !std::is_same_v<Act, fn::Identity> && !dy_is_dz;
  cpu::parallel_chunks(static_cast<std::size_t>(Out), 16, static_cast<std::size_t>(batch),
                       [=](std::size_t begin, std::size_t end) {
    if (gradients == cpu::Accumulate::no) std::fill(bias_grad + begin, bias_grad + end, T(0));
    for (int r = 0; r < batch; ++r) {
      const std::size_t row = static_cast<std::size_t>(r) * Out;
      T* dz_row = dy + row;
      if (chain) {
        const T* y_row = y + row;
        const T* kept_row = kept != nullptr ? kept + row : nullptr;
        ETNN_SIMD
        for (std::size_t j = begin; j < end; ++j) {
          const T g = fn::chain_kept(act, dz_row[j], y_row, kept_row, j);
          dz_row[j] = g;
          bias_grad[j] += g;
        }
      } else {
        ETNN_SIMD
        for (std::size_t j = begin; j < end; ++j) bias_grad[j] += dz_row[j];
      }
    }
  });
  // dW (+)= dZ^T X: dZ^T is dZ read column-major (rows [lo, hi) of dZ^T start at dZ + lo).
  const int rows = blocks.rows > 0 ? blocks.rows : Out;
  if (blocks.rows > 0) blocks.final_from(std::size_t{Out} * In);
  for (int lo = (Out - 1) / rows * rows; lo >= 0; lo -= rows) {
    const std::size_t first = static_cast<std::size_t>(lo) * In;
    cpu::gemm<cpu::Layout::col_major, cpu::Layout::row_major>(gradients, std::min(rows, Out - lo), In, batch, dy + lo,
                                                              Out, x, In, weight_grad + first, In);
    if (blocks.rows > 0) blocks.final_from(first);
  }
  if (dx != nullptr) {
    // dX = dZ W, then through the activation below where there is one to apply
    if constexpr (std::is_same_v<Below, NoActivationBelow>) {
      cpu::gemm<cpu::Layout::row_major, cpu::Layout::row_major>(cpu::Accumulate::no, batch, In, Out, dy, Out, weight,
                                                                In, dx, In);
    } else {
      cpu::gemm<cpu::Layout::row_major, cpu::Layout::row_major>(
          cpu::Accumulate::no, batch, In, Out, dy, Out, weight, In, dx, In,
          cpu::ActivationGradient<decltype(below.act), T>{dx, x, below.kept, In, below.act});
    }
  }
}

}  // namespace etnn
