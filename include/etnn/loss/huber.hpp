#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// Huber loss (PyTorch's HuberLoss), value and gradient in one pass; d_i = y_i - t_i.
//   l_i = 0.5 d_i^2          if |d_i| < delta,   delta (|d_i| - 0.5 delta)   otherwise
//   loss = r sum_i l_i       y, t: (B, S...)   r = 1/n (mean, n = B * S::size) or 1 (sum)
//   dL/dy_i = r d_i          if |d_i| < delta,   r delta sign(d_i)           otherwise
// Huber(delta) = delta * SmoothL1(beta = delta): the same shape, scaled by delta.
#include <cmath>
#include <string>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../tensor/tensor.hpp"
#include "target_loss.hpp"
#include "targets.hpp"

namespace etnn::loss {

namespace detail {
// Huber's term with threshold delta: quadratic within delta of the target, linear beyond.
template <class T>
struct HuberTerm {
  T delta;
  ETNN_HD Term<T> operator()(T y, T t) const {
    const T d = y - t;
    const T a = std::abs(d);
    return a < delta ? Term<T>{T(0.5) * d * d, d} : Term<T>{delta * (a - T(0.5) * delta), delta * sign(d)};
  }
};
}  // namespace detail

struct HuberOptions {
  Reduction reduction = Reduction::mean;
  float delta = 1.0f;  // > 0: where the quadratic part ends
};

class Huber : public detail::TensorTargetLoss<Huber> {
 public:
  using target_kind = RealValues;
  using Options = HuberOptions;

  explicit Huber(Options options = {}) : options_(validated(options)) {}
  const Options& options() const noexcept { return options_; }

 private:
  friend detail::TensorTargetLoss<Huber>;

  static Options validated(Options options) {
    if (!(options.delta > 0.0f) || !std::isfinite(options.delta))
      throw Error(detail::message("etnn::loss::Huber", "delta must be finite and > 0, got ",
                                  std::to_string(options.delta), "; for L1 use etnn::loss::L1"));
    return options;
  }

  template <class Device, class T, ShapeType S, ShapeType TS>
  auto compute(Device device, TensorView<const T, S, Device> output, TensorView<const T, TS, Device> target, T* grad) const {
    detail::check_targets(output, target, "etnn::loss::Huber");
    return elementwise_loss(device, output, target, grad,
                               detail::reduction_scale<T>(options_.reduction, output.size()),
                               detail::HuberTerm<T>{static_cast<T>(options_.delta)});
  }

  Options options_;
};

}  // namespace etnn::loss
