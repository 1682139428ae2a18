#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// The loops of the losses on the CPU: the sum of an element-wise term over every value, and the
// sum of a row functor over the rows of class scores. The losses (loss/*.hpp) define the terms
// and rows; the device's loops are in cuda/loss_loops.hpp (reached through backend/loss_loops.hpp).
#include <cstddef>
#include <span>

#include "../core/device.hpp"
#include "../core/error.hpp"
#include "../expr/loss_term.hpp"
#include "../tensor/tensor.hpp"

namespace etnn {

// loss = scale sum_i f(y_i, t_i),  dL/dy_i = scale f'(y_i, t_i)   y, t: (B, S...)
// term(y, t) returns {f, f'}; grad null: the value alone. A term that is an ETNN_HD functor runs
// on either device (the Cuda overload in cuda/loss_loops.hpp). A DomainTerm's inputs are checked in
// the same pass: an element outside its domain throws etnn::Error naming the first such element
// (after grad was written: it is the step's scratch, and nothing else has changed).
template <class T, ShapeType S, ShapeType TS, class F>
T elementwise_loss(Cpu, TensorView<const T, S, Cpu> output, TensorView<const T, TS, Cpu> target, T* grad, T scale,
                   F term) {
  const std::size_t n = output.size();
  const T* y = output.data();
  const T* t = target.data();
  T total = 0;
  std::size_t first_invalid = n;
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (expr::DomainTerm<F, T>)
      if (first_invalid == n && !term.valid(y[i], t[i])) first_invalid = i;
    const expr::Term<T> e = term(y[i], t[i]);
    total += e.value;
    if (grad != nullptr) grad[i] = e.grad * scale;
  }
  if constexpr (expr::DomainTerm<F, T>)
    if (first_invalid < n) throw Error(term.complaint(first_invalid, y[first_invalid], t[first_invalid]));
  return total * scale;
}

// The index of the first t[i], i < n, outside a TargetDomain (expr/loss_term.hpp) once converted
// to the loss's scalar type T, n when none is.
template <class T, class U, class Domain>
std::size_t first_target_outside(Cpu, const U* t, std::size_t n, Domain domain) {
  for (std::size_t i = 0; i < n; ++i)
    if (!domain.valid(static_cast<T>(t[i]))) return i;
  return n;
}

// A loss on class indices whose rows are independent (CrossEntropy, NLL, MultiMargin), on the host:
// scale * sum_b row(x_b, C, y_b, weight, g_b, scale) in row order, where row also writes
// scale * dl_b/dx_b into g_b when grad is not null. Labels and weights are checked by the caller.
// The host reads labels and weights where they are, so the device's scratch goes unused.
template <class T, class Row, class Scratch>
T label_rows_loss(Cpu, Scratch&, const T* x, int batch, int classes, std::span<const int> labels, const float* weight,
                  T* grad, T scale, Row row, const char* /*who*/) {
  T total = 0;
  for (int b = 0; b < batch; ++b) {
    const std::size_t at = static_cast<std::size_t>(b) * classes;
    total += row(x + at, classes, labels[static_cast<std::size_t>(b)], weight, grad != nullptr ? grad + at : nullptr,
                 scale);
  }
  return total * scale;
}

}  // namespace etnn
