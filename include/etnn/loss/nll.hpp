#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// Negative log-likelihood on log-probabilities (PyTorch's NLLLoss), value and gradient in one pass.
//   x: (B, C) log-probabilities (e.g. after nn::log_softmax)   y: B class indices   w: class weights
//   loss = -r sum_b w[y_b] x_b,y_b      r = 1 / sum_b w[y_b] (mean; 1/B without weights) or 1 (sum)
//   dL/dx_bj = -r w[y_b] [j = y_b]
// When every target has weight 0 the weighted mean is 0/0 = NaN, as in PyTorch.
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"

#include "../tensor/tensor.hpp"
#include "target_loss.hpp"
#include "targets.hpp"

namespace etnn::loss {

namespace detail {
// One row: l = -w[y] x_y; g_j = -scale w[y] [j = y].
struct NllRow {
  template <class T>
  ETNN_HD T operator()(const T* x, int classes, int y, const float* weight, T* g, T scale) const {
    const T w = class_weight<T>(weight, y);
    if (g != nullptr)
      for (int j = 0; j < classes; ++j) g[j] = j == y ? -w * scale : T(0);
    return -w * x[y];
  }
};
}  // namespace detail

struct NllOptions {
  Reduction reduction = Reduction::mean;
  std::vector<float> weight{};  // C class weights (PyTorch's `weight`), or empty for all ones
};

class NLL : public detail::LabelTargetLoss<NLL> {
 public:
  using target_kind = ClassIndices;
  using Options = NllOptions;

  explicit NLL(Options options = {}) : options_(validated(std::move(options))) {}
  const Options& options() const noexcept { return options_; }

 private:
  friend detail::LabelTargetLoss<NLL>;
  static constexpr const char* who = "etnn::loss::NLL";

  static Options validated(Options options) {
    detail::validate_weights(options.weight, who);
    return options;
  }

  template <class T>
  detail::LabelRowPlan<T, detail::NllRow> plan(std::span<const int> labels, int batch, int classes) const {
    const float* weight = detail::checked_class_weights(labels, batch, classes, options_.weight, who);
    return {weight, detail::weighted_reduction_scale<T>(options_.reduction, labels, weight), {}};
  }

  Options options_;
};

}  // namespace etnn::loss
