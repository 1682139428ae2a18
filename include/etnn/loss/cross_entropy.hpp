#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// Softmax cross-entropy on logits (PyTorch's CrossEntropyLoss with class indices), with class
// weights w and label smoothing eps, value and gradient in one pass over the batch.
//   z: (B, C) logits   y: B class indices   p_b = softmax(z_b)   -log p_bc = logsumexp(z_b) - z_bc
//   l_b = (1 - eps) w[y_b] (-log p_b,y_b) + eps/C sum_c w[c] (-log p_bc)
//   loss = r sum_b l_b      r = 1 / sum_b w[y_b] (mean; 1/B without weights) or 1 (sum)
//   dL/dz_bj = r [ p_bj ((1 - eps) w[y_b] + eps/C sum_c w[c]) - (1 - eps) w[y_b] [j = y_b] - eps/C w[j] ]
// This is torch.nn.functional.cross_entropy exactly, including its weighted mean with label
// smoothing (both terms divided by sum_b w[y_b]). When every target has weight 0 the weighted
// mean is 0/0 = NaN, as in PyTorch.
// logsumexp is shifted by the row maximum m and -log p_bc computed as (m - z_bc) + log sum_j exp(z_bj - m),
// so any finite logits are safe and large ones lose no precision to cancellation.
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/config.hpp"
#include "../core/device.hpp"
#include "../core/error.hpp"

#include "../tensor/tensor.hpp"
#include "target_loss.hpp"
#include "targets.hpp"

namespace etnn::loss {

namespace detail {
// l_b of one row z (C logits) with label y; writes scale * dl_b/dz into g when g is not null.
// weight: C class weights or null (all ones); weight_sum = sum_c w[c]. g must not alias z.
template <class T>
ETNN_HD T cross_entropy_row(const T* z, int classes, int label, const float* weight, T weight_sum, T smoothing,
                            T* g, T scale) {
  T m = z[0];
  for (int j = 1; j < classes; ++j) m = z[j] > m ? z[j] : m;
  // sum_j exp(z_j - m); each exp is kept in g, when there is one, for the gradient below.
  T sum = 0;
  if (g != nullptr) {
    for (int j = 0; j < classes; ++j) sum += (g[j] = std::exp(z[j] - m));
  } else {
    for (int j = 0; j < classes; ++j) sum += std::exp(z[j] - m);
  }
  // -log p_j = (m - z_j) + log(sum): the difference of logits first, so nothing cancels.
  const T log_sum = std::log(sum);
  const T target_part = (T(1) - smoothing) * class_weight<T>(weight, label);
  const T smooth_part = smoothing / static_cast<T>(classes);
  T loss = target_part * ((m - z[label]) + log_sum);
  if (smoothing != T(0)) {
    T smooth = 0;
    for (int j = 0; j < classes; ++j) smooth += class_weight<T>(weight, j) * ((m - z[j]) + log_sum);
    loss += smooth_part * smooth;
  }
  if (g != nullptr) {
    const T p_scale = scale * (target_part + smooth_part * weight_sum) / sum;
    for (int j = 0; j < classes; ++j)
      g[j] = g[j] * p_scale - scale * (smooth_part * class_weight<T>(weight, j) + (j == label ? target_part : T(0)));
  }
  return loss;
}
// cross_entropy_row as the row functor of both devices' loops.
template <class T>
struct CrossEntropyRow {
  T weight_sum, smoothing;
  ETNN_HD T operator()(const T* z, int classes, int label, const float* weight, T* g, T scale) const {
    return cross_entropy_row(z, classes, label, weight, weight_sum, smoothing, g, scale);
  }
};
}  // namespace detail

struct CrossEntropyOptions {
  Reduction reduction = Reduction::mean;
  float label_smoothing = 0.0f;  // eps in [0, 1]: the target becomes (1 - eps) onehot + eps / C
  std::vector<float> weight{};   // C class weights (PyTorch's `weight`), or empty for all ones
};

class CrossEntropy : public detail::LabelTargetLoss<CrossEntropy> {
 public:
  using target_kind = ClassIndices;
  using Options = CrossEntropyOptions;

  explicit CrossEntropy(Options options = {}) : options_(validated(std::move(options))) {}
  const Options& options() const noexcept { return options_; }

 private:
  friend detail::LabelTargetLoss<CrossEntropy>;
  static constexpr const char* who = "etnn::loss::CrossEntropy";

  static Options validated(Options options) {
    if (!(options.label_smoothing >= 0.0f && options.label_smoothing <= 1.0f))
      throw Error(detail::message(who, "label_smoothing must be in [0, 1], got ",
                                  std::to_string(options.label_smoothing)));
    detail::validate_weights(options.weight, who);
    return options;
  }

  template <class T>
  detail::LabelRowPlan<T, detail::CrossEntropyRow<T>> plan(std::span<const int> labels, int batch,
                                                            int classes) const {
    const float* weight = detail::checked_class_weights(labels, batch, classes, options_.weight, who);
    T weight_sum = 0;
    for (int j = 0; j < classes; ++j) weight_sum += detail::class_weight<T>(weight, j);
    return {weight, detail::weighted_reduction_scale<T>(options_.reduction, labels, weight),
            {weight_sum, static_cast<T>(options_.label_smoothing)}};
  }

  Options options_;
};

}  // namespace etnn::loss
