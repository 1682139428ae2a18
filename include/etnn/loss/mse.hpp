#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// Mean squared error (PyTorch's MSELoss), value and gradient in one pass.
//   loss = r sum_i (y_i - t_i)^2          y, t: (B, S...)   r = 1/n (mean, n = B * S::size) or 1 (sum)
//   dL/dy_i = 2 r (y_i - t_i)
#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../tensor/tensor.hpp"
#include "target_loss.hpp"
#include "targets.hpp"

namespace etnn::loss {

namespace detail {
// (y - t)^2 and its derivative 2 (y - t).
struct SquaredError {
  template <class T>
  ETNN_HD Term<T> operator()(T y, T t) const {
    const T d = y - t;
    return {d * d, T(2) * d};
  }
};
}  // namespace detail

struct MseOptions {
  Reduction reduction = Reduction::mean;
};

class MSE : public detail::TensorTargetLoss<MSE> {
 public:
  using target_kind = RealValues;
  using Options = MseOptions;

  explicit MSE(Options options = {}) : options_(options) {}
  const Options& options() const noexcept { return options_; }

 private:
  friend detail::TensorTargetLoss<MSE>;

  template <class Device, class T, ShapeType S, ShapeType TS>
  auto compute(Device device, TensorView<const T, S, Device> output, TensorView<const T, TS, Device> target, T* grad) const {
    detail::check_targets(output, target, "etnn::loss::MSE");
    return elementwise_loss(device, output, target, grad,
                               detail::reduction_scale<T>(options_.reduction, output.size()), detail::SquaredError{});
  }

  Options options_;
};

}  // namespace etnn::loss
