#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// Smooth L1 (PyTorch's SmoothL1Loss), value and gradient in one pass; d_i = y_i - t_i.
//   l_i = 0.5 d_i^2 / beta   if |d_i| < beta,   |d_i| - 0.5 beta   otherwise
//   loss = r sum_i l_i         y, t: (B, S...)   r = 1/n (mean, n = B * S::size) or 1 (sum)
//   dL/dy_i = r d_i / beta     if |d_i| < beta,   r sign(d_i)        otherwise
// beta = 0 is L1. Huber (huber.hpp) is beta * SmoothL1 with delta = beta, as in PyTorch.
#include <cmath>
#include <string>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../tensor/tensor.hpp"
#include "target_loss.hpp"
#include "targets.hpp"

namespace etnn::loss {

namespace detail {
// SmoothL1's term with threshold beta: quadratic (divided by beta) within beta, linear beyond.
template <class T>
struct SmoothL1Term {
  T beta;
  ETNN_HD Term<T> operator()(T y, T t) const {
    const T d = y - t;
    const T a = std::abs(d);
    return a < beta ? Term<T>{T(0.5) * d * d / beta, d / beta} : Term<T>{a - T(0.5) * beta, sign(d)};
  }
};
}  // namespace detail

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

  template <class Device, class T, ShapeType S, ShapeType TS>
  auto compute(Device device, TensorView<const T, S, Device> output, TensorView<const T, TS, Device> target, T* grad) const {
    detail::check_targets(output, target, "etnn::loss::SmoothL1");
    return elementwise_loss(device, output, target, grad,
                               detail::reduction_scale<T>(options_.reduction, output.size()),
                               detail::SmoothL1Term<T>{static_cast<T>(options_.beta)});
  }

  Options options_;
};

}  // namespace etnn::loss
