#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// The run-time checks of a loss's inputs: targets of the output's shape with one row per sample,
// class indices in range, targets in a loss's TargetDomain (binary targets), and class weights
// (finite, >= 0, one per class). Each throws an etnn::ShapeError or etnn::Error whose message
// starts with the loss's name.
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "../backend/loss_loops.hpp"
#include "../core/error.hpp"
#include "../expr/loss_term.hpp"
#include "../tensor/copy.hpp"
#include "../tensor/tensor.hpp"
#include "checks.hpp"

namespace etnn::loss::detail {

using etnn::detail::message;

// Targets of the output's shape, one row per sample (on any device: only the shapes are read).
template <class T, ShapeType S, ShapeType TS, class Device>
void check_targets(TensorView<const T, S, Device> output, TensorView<const T, TS, Device> target, const char* who) {
  static_assert(check::target_shape<TS, S>());
  if (output.batch() != target.batch())
    throw ShapeError(message(who, std::to_string(target.batch()), " targets for a batch of ",
                             std::to_string(output.batch()), "; pass one target row per sample"));
}

// One class index in [0, classes) per sample.
inline void check_labels(std::span<const int> labels, int batch, int classes, const char* who) {
  if (static_cast<int>(labels.size()) != batch)
    throw ShapeError(message(who, std::to_string(labels.size()), " labels for a batch of ", std::to_string(batch),
                             "; pass one class index per sample"));
  for (std::size_t b = 0; b < labels.size(); ++b) {
    if (labels[b] < 0 || labels[b] >= classes)
      throw ShapeError(message(who, "label ", std::to_string(labels[b]), " of sample ", std::to_string(b),
                               " is outside [0, ", std::to_string(classes), "); the network has ",
                               std::to_string(classes), " outputs"));
  }
}

// The complaint about a target that is neither of the two values a loss takes (0/1 multi-hot,
// -1/+1 signs).
template <class T>
std::string binary_target_complaint(const char* who, std::size_t i, T target, T negative, T positive) {
  return message(who, "target element ", std::to_string(i), " is ", std::to_string(target),
                 "; this loss takes targets of ", std::to_string(negative), " or ", std::to_string(positive));
}

// Every target, converted to the loss's scalar type T, in `domain` (expr::TargetDomain), on either
// device (on a CUDA device one kernel and a wait for its answer); else an etnn::Error with the
// domain's complaint about the first outside.
template <class T, class U, ShapeType TS, class Device, class Domain>
void check_target_domain(TensorView<const U, TS, Device> target, Domain domain) {
  static_assert(expr::TargetDomain<Domain, T>);
  const std::size_t n = target.size();
  const std::size_t first = first_target_outside<T>(Device{}, target.data(), n, domain);
  if (first == n) return;
  U value{};
  copy_to_host(Device{}, &value, target.data() + first, 1);
  throw Error(domain.complaint(first, static_cast<T>(value)));
}

// PyTorch's per-class `weight` (empty: all ones): finite and >= 0, checked at construction.
inline void validate_weights(const std::vector<float>& weight, const char* who) {
  for (std::size_t c = 0; c < weight.size(); ++c) {
    if (!(weight[c] >= 0.0f) || !std::isfinite(weight[c]))
      throw Error(message(who, "weight[", std::to_string(c), "] is ", std::to_string(weight[c]),
                          "; class weights must be finite and >= 0"));
  }
}

// One weight per class, checked where the class count is known (at each use).
inline void check_weight_count(const std::vector<float>& weight, int classes, const char* who) {
  if (!weight.empty() && weight.size() != static_cast<std::size_t>(classes))
    throw ShapeError(message(who, std::to_string(weight.size()), " class weights for ", std::to_string(classes),
                             " classes; pass one weight per network output, or none"));
}

// The weights as a pointer, null for all ones.
inline const float* weights_or_null(const std::vector<float>& weight) {
  return weight.empty() ? nullptr : weight.data();
}

// The labels (one in [0, classes) per sample) and class weights (one per class, or none) checked;
// the weights, or null for all ones.
inline const float* checked_class_weights(std::span<const int> labels, int batch, int classes,
                                          const std::vector<float>& weight, const char* who) {
  check_labels(labels, batch, classes, who);
  check_weight_count(weight, classes, who);
  return weights_or_null(weight);
}

}  // namespace etnn::loss::detail
