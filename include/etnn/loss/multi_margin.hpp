#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// Multi-class margin loss on scores (PyTorch's MultiMarginLoss), value and gradient in one pass.
//   x: (B, C) scores   y: B class indices   h_bj = margin - x_b,y_b + x_bj   w: class weights
//   l_b = w[y_b] / C sum_{j != y_b} max(0, h_bj)^p          p = 1 or 2
//   loss = r sum_b l_b       r = 1/B (mean; PyTorch divides by B even with weights) or 1 (sum)
//   dL/dx_bj = r w[y_b] / C p max(0, h_bj)^(p-1)  for j != y_b,   dL/dx_b,y_b = -sum_{j != y_b} dL/dx_bj
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"

#include "../tensor/tensor.hpp"
#include "target_loss.hpp"
#include "targets.hpp"

namespace etnn::loss {

namespace detail {
// One row: l = w[y] / C sum_{j != y} max(0, h_j)^p and its gradient (see above), scaled by scale.
template <class T>
struct MultiMarginRow {
  T margin;
  int p;
  ETNN_HD T operator()(const T* x, int classes, int y, const float* weight, T* g, T scale) const {
    const T w = class_weight<T>(weight, y) / static_cast<T>(classes);
    T loss = 0, target_grad = 0;
    for (int j = 0; j < classes; ++j) {
      if (j == y) continue;
      const T hinge = margin - x[y] + x[j];
      const T h = hinge > T(0) ? hinge : T(0);
      loss += w * (p == 1 ? h : h * h);
      if (g != nullptr) {
        const T d = h > T(0) ? scale * w * (p == 1 ? T(1) : T(2) * h) : T(0);
        g[j] = d;
        target_grad -= d;
      }
    }
    if (g != nullptr) g[y] = target_grad;
    return loss;
  }
};
}  // namespace detail

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

  template <class T>
  detail::LabelRowPlan<T, detail::MultiMarginRow<T>> plan(std::span<const int> labels, int batch,
                                                           int classes) const {
    return {detail::checked_class_weights(labels, batch, classes, options_.weight, who),
            detail::reduction_scale<T>(options_.reduction, static_cast<std::size_t>(batch)),
            {static_cast<T>(options_.margin), options_.p}};
  }

  Options options_;
};

}  // namespace etnn::loss
