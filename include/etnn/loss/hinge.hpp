#pragma once
// Binary hinge loss on scores with targets -1 or +1, value and gradient in one pass.
//   z, y: (B, S...) (usually (B, 1)), y_i in {-1, +1}
//   loss = r sum_i max(0, 1 - y_i z_i)       r = 1/n (mean, n = B * S::size) or 1 (sum)
//   dL/dz_i = -r y_i  where 1 - y_i z_i > 0, else 0
// PyTorch has no exact equivalent (HingeEmbeddingLoss takes distances, MultiMarginLoss class
// indices); this is scikit-learn's hinge_loss and the SVM hinge, mean over all outputs.
#include "../core/error.hpp"
#include "../tensor/tensor.hpp"
#include "reduction.hpp"
#include "targets.hpp"

namespace etnn::loss {

struct HingeOptions {
  Reduction reduction = Reduction::mean;
};

class Hinge : public detail::TensorTargetLoss<Hinge> {
 public:
  using target_kind = RealValues;
  using Options = HingeOptions;

  explicit Hinge(Options options = {}) : options_(options) {}
  const Options& options() const noexcept { return options_; }

 private:
  friend detail::TensorTargetLoss<Hinge>;
  static constexpr const char* who = "etnn::loss::Hinge";

  template <class T, ShapeType S, ShapeType TS>
  T compute(Cpu, TensorView<const T, S, Cpu> scores, TensorView<const T, TS, Cpu> target, T* grad) const {
    detail::check_targets(scores, target, who);
    detail::check_binary_targets(target.flat(), T(-1), T(1), who);
    return detail::elementwise(Cpu{}, scores, target, grad, detail::reduction_scale<T>(options_.reduction, scores.size()),
                               [](T z, T y) {
                                 const T h = T(1) - y * z;
                                 return h > T(0) ? detail::Term<T>{h, -y} : detail::Term<T>{T(0), T(0)};
                               });
  }

  Options options_;
};

}  // namespace etnn::loss
