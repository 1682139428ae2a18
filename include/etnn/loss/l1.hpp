#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// Mean absolute error (PyTorch's L1Loss), value and gradient in one pass.
//   loss = r sum_i |y_i - t_i|          y, t: (B, S...)   r = 1/n (mean, n = B * S::size) or 1 (sum)
//   dL/dy_i = r sign(y_i - t_i)         (0 where y_i = t_i, as PyTorch)
#include <cmath>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../tensor/tensor.hpp"
#include "target_loss.hpp"
#include "targets.hpp"

namespace etnn::loss {

namespace detail {
// |y - t| and its derivative sign(y - t).
struct AbsoluteError {
  template <class T>
  ETNN_HD Term<T> operator()(T y, T t) const {
    const T d = y - t;
    return {std::abs(d), sign(d)};
  }
};
}  // namespace detail

struct L1Options {
  Reduction reduction = Reduction::mean;
};

class L1 : public detail::TensorTargetLoss<L1> {
 public:
  using target_kind = RealValues;
  using Options = L1Options;

  explicit L1(Options options = {}) : options_(options) {}
  const Options& options() const noexcept { return options_; }

 private:
  friend detail::TensorTargetLoss<L1>;

  template <class Device, class T, ShapeType S, ShapeType TS>
  auto compute(Device device, TensorView<const T, S, Device> output, TensorView<const T, TS, Device> target, T* grad) const {
    detail::check_targets(output, target, "etnn::loss::L1");
    return elementwise_loss(device, output, target, grad,
                               detail::reduction_scale<T>(options_.reduction, output.size()), detail::AbsoluteError{});
  }

  Options options_;
};

}  // namespace etnn::loss
