#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// Binary hinge loss on scores with targets -1 or +1, value and gradient in one pass.
//   z, y: (B, S...) (usually (B, 1)), y_i in {-1, +1}
//   loss = r sum_i max(0, 1 - y_i z_i)       r = 1/n (mean, n = B * S::size) or 1 (sum)
//   dL/dz_i = -r y_i  where 1 - y_i z_i > 0, else 0
// PyTorch has no exact equivalent (HingeEmbeddingLoss takes distances, MultiMarginLoss class
// indices); this is scikit-learn's hinge_loss and the SVM hinge, mean over all outputs.
#include <cstddef>
#include <string>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../tensor/tensor.hpp"
#include "target_loss.hpp"
#include "targets.hpp"

namespace etnn::loss {

namespace detail {
// max(0, 1 - y z) and its derivative in z.
struct HingeTerm {
  template <class T>
  ETNN_HD Term<T> operator()(T z, T y) const {
    const T h = T(1) - y * z;
    return h > T(0) ? Term<T>{h, -y} : Term<T>{T(0), T(0)};
  }
};
// Hinge's targets: -1 or +1; another is an error.
struct HingeTargets {
  template <class T>
  ETNN_HD bool valid(T y) const {
    return y == T(-1) || y == T(1);
  }
  template <class T>
  std::string complaint(std::size_t i, T y) const {
    return binary_target_complaint("etnn::loss::Hinge", i, y, T(-1), T(1));
  }
};
}  // namespace detail

struct HingeOptions {
  Reduction reduction = Reduction::mean;
};

class Hinge : public detail::TensorTargetLoss<Hinge> {
 public:
  using target_kind = RealValues;
  using target_domain = detail::HingeTargets;
  using Options = HingeOptions;

  explicit Hinge(Options options = {}) : options_(options) {}
  const Options& options() const noexcept { return options_; }

 private:
  friend detail::TensorTargetLoss<Hinge>;

  template <class Device, class T, ShapeType S, ShapeType TS>
  auto compute(Device device, TensorView<const T, S, Device> scores, TensorView<const T, TS, Device> target, T* grad) const {
    detail::check_targets(scores, target, "etnn::loss::Hinge");
    return elementwise_loss(device, scores, target, grad,
                               detail::reduction_scale<T>(options_.reduction, scores.size()), detail::HingeTerm{});
  }

  Options options_;
};

}  // namespace etnn::loss
