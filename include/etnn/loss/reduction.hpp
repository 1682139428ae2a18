#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// PyTorch's `reduction` of a loss to one number: the mean (default) or the sum of the per-element
// (or per-sample) losses, and the weighted mean over class weights.
//   etnn::loss::L1 loss({.reduction = etnn::loss::Reduction::sum});
#include <cstddef>
#include <span>

#include "../core/config.hpp"

namespace etnn::loss {

// PyTorch's `reduction`: the mean (default) or the sum of the per-element (or per-sample) losses.
// PyTorch's 'none' has no counterpart: a loss returns one number.
enum class Reduction { mean, sum };

namespace detail {

// 1/count for the mean, 1 for the sum.
template <class T>
T reduction_scale(Reduction reduction, std::size_t count) {
  return reduction == Reduction::mean ? T(1) / static_cast<T>(count) : T(1);
}

// Class c's weight, 1 without weights (weight null).
template <class T>
ETNN_HD T class_weight(const float* weight, int c) {
  return weight == nullptr ? T(1) : static_cast<T>(weight[c]);
}

// PyTorch's weighted mean over the batch divides by the targets' weights, sum_b w[y_b]
// (B without weights); the sum divides by nothing.
template <class T>
T weighted_reduction_scale(Reduction reduction, std::span<const int> labels, const float* weight) {
  if (reduction == Reduction::sum) return T(1);
  T total = 0;
  for (int y : labels) total += class_weight<T>(weight, y);
  return T(1) / total;
}

}  // namespace detail
}  // namespace etnn::loss
