#pragma once
// Fully connected layer with a fused activation, on the CPU.
//
// Forward:   Z = X W^T + b,  Y = f(Z)          X: (B, IN)  W: (OUT, IN)  b: (OUT)  Y, Z: (B, OUT)
//            one Eigen GEMM into Y, then one pass over Y adding b and applying f (keeping Z only
//            when f' needs its input and backward will run).
// Backward:  dZ = dY (.) f'(Z, Y)   written over dY,  db += sum_b dZ      one pass
//            dW += dZ^T X                                                  GEMM
//            dX  = dZ W                                                    GEMM, skipped for the first layer
// Gradients accumulate (+=) so that micro-batches can be summed; the Trainer zeroes them.
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "../core/device.hpp"
#include "../expr/functors.hpp"
#include "eigen_maps.hpp"
#include "parallel.hpp"

namespace etnn {

template <int In, int Out, class Act, class T>
void dense_forward(Cpu, const T* weight, const T* bias, const T* x, T* y, T* z_saved, int batch, Act act) {
  const cpu::ConstMatrixMap<T, In> X(x, batch, In);
  const cpu::ConstMatrixMap<T, In> W(weight, Out, In);
  cpu::MatrixMap<T, Out> Y(y, batch, Out);
  Y.noalias() = X * W.transpose();
  // Epilogue over rows: y = f(y + b), z = y + b.
  cpu::parallel_chunks(static_cast<std::size_t>(batch), 8, Out, [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) {
      T* row = y + r * Out;
      T* zrow = z_saved != nullptr ? z_saved + r * Out : nullptr;
      for (int j = 0; j < Out; ++j) {
        const T pre = row[j] + bias[j];
        if (zrow != nullptr) zrow[j] = pre;
        row[j] = act(pre);
      }
    }
  });
}

template <int In, int Out, class Act, class T>
void dense_backward(Cpu, const T* weight, T* weight_grad, T* bias_grad, const T* x, const T* y,
                    const T* z_saved, T* dy, T* dx, int batch, Act act) {
  // dZ = dY (.) f'(Z, Y) and db += column sums, in one pass. Threads own disjoint column ranges,
  // so the bias reduction needs no atomics and sums each column in a fixed order.
  cpu::parallel_chunks(static_cast<std::size_t>(Out), 16, static_cast<std::size_t>(batch),
                  [&](std::size_t begin, std::size_t end) {
    for (int r = 0; r < batch; ++r) {
      const std::size_t row = static_cast<std::size_t>(r) * Out;
      for (std::size_t j = begin; j < end; ++j) {
        T g = dy[row + j];
        if constexpr (!std::is_same_v<Act, fn::Identity>) {
          const T yv = y[row + j];
          g *= act.derivative(z_saved != nullptr ? z_saved[row + j] : yv, yv);
          dy[row + j] = g;
        }
        bias_grad[j] += g;
      }
    }
  });
  const cpu::ConstMatrixMap<T, Out> dZ(dy, batch, Out);
  const cpu::ConstMatrixMap<T, In> X(x, batch, In);
  cpu::MatrixMap<T, In> dW(weight_grad, Out, In);
  dW.noalias() += dZ.transpose() * X;
  if (dx != nullptr) {
    const cpu::ConstMatrixMap<T, In> W(weight, Out, In);
    cpu::MatrixMap<T, In> dX(dx, batch, In);
    dX.noalias() = dZ * W;
  }
}

}  // namespace etnn
