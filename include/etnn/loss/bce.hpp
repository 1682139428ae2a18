#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// Binary cross-entropy on probabilities (PyTorch's BCELoss), value and gradient in one pass.
//   x, t: (B, S...), x and t in [0, 1]  (x e.g. after nn::sigmoid; on logits BCEWithLogits is stabler)
//   l_i = -( t_i max(log x_i, -100) + (1 - t_i) max(log(1 - x_i), -100) )
//   loss = r sum_i l_i      r = 1/n (mean, n = B * S::size) or 1 (sum)
//   dL/dx_i = r (x_i - t_i) / max(x_i (1 - x_i), 1e-12)
// Both clamps are PyTorch's: the logs at -100 keep the value finite at x = 0 or 1, the
// denominator at 1e-12 (the float nearest it, also in double, as PyTorch) keeps the gradient
// finite there.
#include <cmath>
#include <cstddef>
#include <string>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../tensor/tensor.hpp"
#include "target_loss.hpp"
#include "targets.hpp"

namespace etnn::loss {

namespace detail {
// l and dl/dp of one probability p with target t (see above); p outside [0, 1] (or NaN) is an
// error, which names the element.
struct BceTerm {
  template <class T>
  ETNN_HD Term<T> operator()(T p, T t) const {
    const T log_p = clamped_log(std::log(p));
    const T log_q = clamped_log(std::log1p(-p));
    const T p_q = p * (T(1) - p);
    return {-(t * log_p + (T(1) - t) * log_q), (p - t) / (p_q < T(1e-12f) ? T(1e-12f) : p_q)};
  }
  template <class T>
  ETNN_HD bool valid(T p, T) const {
    return p >= T(0) && p <= T(1);
  }
  template <class T>
  std::string complaint(std::size_t i, T p, T) const {
    return message("etnn::loss::BCE", "input element ", std::to_string(i), " is ", std::to_string(p),
                   "; BCE takes probabilities in [0, 1]; for logits use BCEWithLogits");
  }

 private:
  template <class T>
  ETNN_HD static T clamped_log(T log_value) {
    return log_value < T(-100) ? T(-100) : log_value;  // std::max(log_value, -100)
  }
};
}  // namespace detail

struct BceOptions {
  Reduction reduction = Reduction::mean;
};

class BCE : public detail::TensorTargetLoss<BCE> {
 public:
  using target_kind = RealValues;
  using Options = BceOptions;

  explicit BCE(Options options = {}) : options_(options) {}
  const Options& options() const noexcept { return options_; }

 private:
  friend detail::TensorTargetLoss<BCE>;

  template <class Device, class T, ShapeType S, ShapeType TS>
  auto compute(Device device, TensorView<const T, S, Device> probs, TensorView<const T, TS, Device> target, T* grad) const {
    detail::check_targets(probs, target, "etnn::loss::BCE");
    return elementwise_loss(device, probs, target, grad,
                               detail::reduction_scale<T>(options_.reduction, probs.size()), detail::BceTerm{});
  }

  Options options_;
};

}  // namespace etnn::loss
