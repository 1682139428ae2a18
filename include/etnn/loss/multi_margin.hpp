#pragma once
// Multi-class margin loss on scores (PyTorch's MultiMarginLoss), value and gradient in one pass.
//   x: (B, C) scores   y: B class indices   h_bj = margin - x_b,y_b + x_bj   w: class weights
//   l_b = w[y_b] / C sum_{j != y_b} max(0, h_bj)^p          p = 1 or 2
//   loss = r sum_b l_b       r = 1/B (mean; PyTorch divides by B even with weights) or 1 (sum)
//   dL/dx_bj = r w[y_b] / C p max(0, h_bj)^(p-1)  for j != y_b,   dL/dx_b,y_b = -sum_{j != y_b} dL/dx_bj
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../core/static_checks.hpp"
#include "../tensor/tensor.hpp"
#include "reduction.hpp"
#include "targets.hpp"

namespace etnn::loss {

struct MultiMarginOptions {
  Reduction reduction = Reduction::mean;
  int p = 1;             // 1 or 2: the power of each hinge
  float margin = 1.0f;   // how far the target's score must lead every other score
  std::vector<float> weight{};  // C class weights (PyTorch's `weight`), or empty for all ones
};

class MultiMargin : public detail::LabelTargetLoss<MultiMargin> {
 public:
  using target_kind = ClassIndices;
  using Options = MultiMarginOptions;

  explicit MultiMargin(Options options = {}) : options_(validated(std::move(options))) {}
  const Options& options() const noexcept { return options_; }

 private:
  friend detail::LabelTargetLoss<MultiMargin>;
  static constexpr const char* who = "etnn::loss::MultiMargin";

  static Options validated(Options options) {
    if (options.p != 1 && options.p != 2)
      throw Error(detail::message(who, "p must be 1 or 2, got ", std::to_string(options.p)));
    if (!std::isfinite(options.margin))
      throw Error(detail::message(who, "margin must be finite, got ", std::to_string(options.margin)));
    detail::validate_weights(options.weight, who);
    return options;
  }

  template <class T, ShapeType S>
  T compute(TensorView<const T, S, Cpu> scores, std::span<const int> labels, T* grad) const {
    static_assert(check::class_scores<S>());
    constexpr int classes = S::dims[0];
    const int batch = scores.batch();
    detail::check_labels(labels, batch, classes, who);
    detail::check_weight_count(options_.weight, classes, who);
    const float* weight = detail::weights_or_null(options_.weight);
    const T scale = detail::reduction_scale<T>(options_.reduction, static_cast<std::size_t>(batch));
    const T margin = static_cast<T>(options_.margin);
    T total = 0;
    for (int b = 0; b < batch; ++b) {
      const T* x = scores.sample(b);
      const int y = labels[static_cast<std::size_t>(b)];
      const T w = detail::class_weight<T>(weight, y) / static_cast<T>(classes);
      T* g = grad != nullptr ? grad + static_cast<std::size_t>(b) * classes : nullptr;
      T target_grad = 0;
      for (int j = 0; j < classes; ++j) {
        if (j == y) continue;
        const T h = std::max(margin - x[y] + x[j], T(0));
        total += w * (options_.p == 1 ? h : h * h);
        if (g != nullptr) {
          const T d = h > T(0) ? scale * w * (options_.p == 1 ? T(1) : T(2) * h) : T(0);
          g[j] = d;
          target_grad -= d;
        }
      }
      if (g != nullptr) g[y] = target_grad;
    }
    return total * scale;
  }

  Options options_;
};

}  // namespace etnn::loss
