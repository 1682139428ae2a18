#pragma once
// Binary cross-entropy on probabilities (PyTorch's BCELoss), value and gradient in one pass.
//   x, t: (B, S...), x and t in [0, 1]  (x e.g. after nn::sigmoid; on logits BCEWithLogits is stabler)
//   l_i = -( t_i max(log x_i, -100) + (1 - t_i) max(log(1 - x_i), -100) )
//   loss = r sum_i l_i      r = 1/n (mean, n = B * S::size) or 1 (sum)
//   dL/dx_i = r (x_i - t_i) / max(x_i (1 - x_i), 1e-12)
// Both clamps are PyTorch's: the logs at -100 keep the value finite at x = 0 or 1, the
// denominator at 1e-12 (the float nearest it, also in double, as PyTorch) keeps the gradient
// finite there.
#include <algorithm>
#include <cmath>
#include <span>
#include <string>

#include "../core/error.hpp"
#include "../tensor/tensor.hpp"
#include "reduction.hpp"
#include "targets.hpp"

namespace etnn::loss {

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
  static constexpr const char* who = "etnn::loss::BCE";

  template <class T, ShapeType S, ShapeType TS>
  T compute(Cpu, TensorView<const T, S, Cpu> probs, TensorView<const T, TS, Cpu> target, T* grad) const {
    detail::check_targets(probs, target, who);
    const std::span<const T> x = probs.flat();
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (!(x[i] >= T(0) && x[i] <= T(1)))
        throw Error(detail::message(who, "input element ", std::to_string(i), " is ", std::to_string(x[i]),
                                    "; BCE takes probabilities in [0, 1]; for logits use BCEWithLogits"));
    }
    return detail::elementwise(Cpu{}, probs, target, grad, detail::reduction_scale<T>(options_.reduction, probs.size()),
                               [](T p, T t) {
                                 const T log_p = std::max(std::log(p), T(-100));
                                 const T log_q = std::max(std::log1p(-p), T(-100));
                                 return detail::Term<T>{-(t * log_p + (T(1) - t) * log_q),
                                                        (p - t) / std::max(p * (T(1) - p), T(1e-12f))};
                               });
  }

  Options options_;
};

}  // namespace etnn::loss
