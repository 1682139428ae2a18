#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// Binary cross-entropy on logits (PyTorch's BCEWithLogitsLoss with a scalar pos_weight), value
// and gradient in one pass, stable for any finite logit.
//   z, t: (B, S...), t in [0, 1]   a = 1 + (pos_weight - 1) t   sigma(z) = 1 / (1 + exp(-z))
//   l_i = (1 - t_i) z_i + a_i softplus(-z_i)        softplus(-z) = max(-z, 0) + log1p(exp(-|z|))
//       = max(z_i, 0) - z_i t_i + log1p(exp(-|z_i|))   when pos_weight = 1
//   loss = r sum_i l_i      r = 1/n (mean, n = B * S::size) or 1 (sum)
//   dL/dz_i = r [ (1 - t_i) - a_i sigma(-z_i) ]    (= r (sigma(z_i) - t_i) when pos_weight = 1)
// PyTorch's pos_weight is a per-class tensor; here it is one number for every output.
#include <cmath>
#include <string>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../tensor/tensor.hpp"
#include "target_loss.hpp"
#include "targets.hpp"

namespace etnn::loss {

namespace detail {
// l and dl/dz of one logit z with target t (see above), in forms without cancellation:
//   l     = (1 - t) z + a L                 (z >= 0)      -pos_weight t z + a L          (z < 0)
//   dl/dz = ((1 - t) - pos_weight t e) / (1 + e)  (z >= 0)  (e (1 - t) - pos_weight t) / (1 + e)  (z < 0)
// with e = exp(-|z|) in (0, 1] and L = log1p(e).
template <class T>
ETNN_HD Term<T> bce_with_logits_term(T z, T t, T pos_weight) {
  const T e = std::exp(-std::abs(z));
  const T a = T(1) + (pos_weight - T(1)) * t;
  const bool positive = z >= T(0);
  return {(positive ? (T(1) - t) * z : -pos_weight * t * z) + a * std::log1p(e),
          (positive ? (T(1) - t) - pos_weight * t * e : e * (T(1) - t) - pos_weight * t) / (T(1) + e)};
}
template <class T>
struct BceWithLogitsTerm {
  T pos_weight;
  ETNN_HD Term<T> operator()(T z, T t) const { return bce_with_logits_term(z, t, pos_weight); }
};
}  // namespace detail

struct BceWithLogitsOptions {
  Reduction reduction = Reduction::mean;
  float pos_weight = 1.0f;  // > 1 raises recall, < 1 precision: the positive term is multiplied by it
};

class BCEWithLogits : public detail::TensorTargetLoss<BCEWithLogits> {
 public:
  using target_kind = RealValues;
  using Options = BceWithLogitsOptions;

  explicit BCEWithLogits(Options options = {}) : options_(validated(options)) {}
  const Options& options() const noexcept { return options_; }

 private:
  friend detail::TensorTargetLoss<BCEWithLogits>;

  static Options validated(Options options) {
    if (!(options.pos_weight >= 0.0f) || !std::isfinite(options.pos_weight))
      throw Error(detail::message("etnn::loss::BCEWithLogits", "pos_weight must be finite and >= 0, got ",
                                  std::to_string(options.pos_weight)));
    return options;
  }

  template <class Device, class T, ShapeType S, ShapeType TS>
  auto compute(Device device, TensorView<const T, S, Device> logits, TensorView<const T, TS, Device> target, T* grad) const {
    detail::check_targets(logits, target, "etnn::loss::BCEWithLogits");
    return elementwise_loss(device, logits, target, grad,
                               detail::reduction_scale<T>(options_.reduction, logits.size()),
                               detail::BceWithLogitsTerm<T>{static_cast<T>(options_.pos_weight)});
  }

  Options options_;
};

}  // namespace etnn::loss
