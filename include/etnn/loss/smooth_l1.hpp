#pragma once
// Smooth L1 (PyTorch's SmoothL1Loss), value and gradient in one pass; d_i = y_i - t_i.
//   l_i = 0.5 d_i^2 / beta   if |d_i| < beta,   |d_i| - 0.5 beta   otherwise
//   loss = r sum_i l_i         y, t: (B, S...)   r = 1/n (mean, n = B * S::size) or 1 (sum)
//   dL/dy_i = r d_i / beta     if |d_i| < beta,   r sign(d_i)        otherwise
// beta = 0 is L1. Huber (huber.hpp) is beta * SmoothL1 with delta = beta, as in PyTorch.
#include <cmath>
#include <string>

#include "../core/error.hpp"
#include "../tensor/tensor.hpp"
#include "reduction.hpp"
#include "targets.hpp"

namespace etnn::loss {

struct SmoothL1Options {
  Reduction reduction = Reduction::mean;
  float beta = 1.0f;  // >= 0: where the quadratic part ends
};

class SmoothL1 : public detail::TensorTargetLoss<SmoothL1> {
 public:
  using target_kind = RealValues;
  using Options = SmoothL1Options;

  explicit SmoothL1(Options options = {}) : options_(validated(options)) {}
  const Options& options() const noexcept { return options_; }

 private:
  friend detail::TensorTargetLoss<SmoothL1>;

  static Options validated(Options options) {
    if (!(options.beta >= 0.0f) || !std::isfinite(options.beta))
      throw Error(detail::message("etnn::loss::SmoothL1", "beta must be finite and >= 0, got ",
                                  std::to_string(options.beta)));
    return options;
  }

  template <class T, ShapeType S, ShapeType TS>
  T compute(TensorView<const T, S, Cpu> output, TensorView<const T, TS, Cpu> target, T* grad) const {
    detail::check_targets(output, target, "etnn::loss::SmoothL1");
    const T beta = static_cast<T>(options_.beta);
    return detail::elementwise(output, target, grad, detail::reduction_scale<T>(options_.reduction, output.size()),
                               [beta](T y, T t) {
                                 const T d = y - t;
                                 const T a = std::abs(d);
                                 return a < beta ? detail::Term<T>{T(0.5) * d * d / beta, d / beta}
                                                 : detail::Term<T>{a - T(0.5) * beta, detail::sign(d)};
                               });
  }

  Options options_;
};

}  // namespace etnn::loss
