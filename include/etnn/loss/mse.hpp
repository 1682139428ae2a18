#pragma once
// Mean squared error, value and gradient in one pass.
//   loss = 1/n sum_i (y_i - t_i)^2          n = B * output size (PyTorch's MSELoss, mean)
//   dL/dy_i = 2 (y_i - t_i) / n
#include <cstddef>
#include <string>

#include "../core/device.hpp"
#include "../core/error.hpp"
#include "../core/static_checks.hpp"
#include "../tensor/tensor.hpp"
#include "targets.hpp"

namespace etnn::loss {

struct MSE {
  using target_kind = RealValues;

  template <class T, ShapeType S, ShapeType TS>
  T value_and_grad(Cpu, TensorView<const T, S, Cpu> output, TensorView<const T, TS, Cpu> target, T* grad) const {
    return run(output, target, grad);
  }

  template <class T, ShapeType S, ShapeType TS>
  T value(Cpu, TensorView<const T, S, Cpu> output, TensorView<const T, TS, Cpu> target) const {
    return run(output, target, static_cast<T*>(nullptr));
  }

 private:
  template <class T, ShapeType S, ShapeType TS>
  static T run(TensorView<const T, S, Cpu> output, TensorView<const T, TS, Cpu> target, T* grad) {
    static_assert(check::target_shape<TS, S>());
    if (output.batch() != target.batch())
      throw ShapeError("etnn::loss::MSE: " + std::to_string(target.batch()) + " targets for a batch of " +
                       std::to_string(output.batch()));
    const std::size_t n = output.size();
    const T inv_n = T(1) / static_cast<T>(n);
    const T* y = output.data();
    const T* t = target.data();
    T total = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const T d = y[i] - t[i];
      total += d * d;
      if (grad != nullptr) grad[i] = T(2) * d * inv_n;
    }
    return total * inv_n;
  }
};

}  // namespace etnn::loss
