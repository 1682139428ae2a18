#pragma once
// Softmax cross-entropy on logits, value and gradient in one pass over the batch.
//   loss = 1/B sum_b [ logsumexp(z_b) - z_b[y_b] ]                 (PyTorch's CrossEntropyLoss, mean)
//   dL/dz_b = (softmax(z_b) - onehot(y_b)) / B
// logsumexp is shifted by the row maximum, so any finite logits are safe.
#include <cmath>
#include <cstddef>
#include <span>
#include <string>

#include "../core/config.hpp"
#include "../core/device.hpp"
#include "../core/error.hpp"
#include "../core/static_checks.hpp"
#include "../tensor/tensor.hpp"
#include "targets.hpp"

namespace etnn::loss {

namespace detail {
// Loss of one row z (C logits) with label y; writes scale * dL/dz into g when g is not null.
template <class T>
ETNN_HD T cross_entropy_row(const T* z, int classes, int label, T* g, T scale) {
  T m = z[0];
  for (int j = 1; j < classes; ++j) m = z[j] > m ? z[j] : m;
  T sum = 0;
  for (int j = 0; j < classes; ++j) sum += std::exp(z[j] - m);
  const T lse = m + std::log(sum);
  if (g != nullptr) {
    const T inv = scale / sum;
    for (int j = 0; j < classes; ++j) g[j] = std::exp(z[j] - m) * inv - (j == label ? scale : T(0));
  }
  return lse - z[label];
}

inline void check_labels(std::span<const int> labels, int batch, int classes, const char* who) {
  if (static_cast<int>(labels.size()) != batch)
    throw ShapeError(std::string(who) + ": " + std::to_string(labels.size()) + " labels for a batch of " +
                     std::to_string(batch) + "; pass one class index per sample");
  for (std::size_t b = 0; b < labels.size(); ++b) {
    if (labels[b] < 0 || labels[b] >= classes)
      throw ShapeError(std::string(who) + ": label " + std::to_string(labels[b]) + " of sample " +
                       std::to_string(b) + " is outside [0, " + std::to_string(classes) +
                       "); the network has " + std::to_string(classes) + " outputs");
  }
}
}  // namespace detail

struct CrossEntropy {
  using target_kind = ClassIndices;

  // Mean loss over the batch; grad (B, C) receives dL/dlogits.
  template <class T, ShapeType S>
  T value_and_grad(Cpu, TensorView<const T, S, Cpu> logits, std::span<const int> labels, T* grad) const {
    return run(logits, labels, grad);
  }

  template <class T, ShapeType S>
  T value(Cpu, TensorView<const T, S, Cpu> logits, std::span<const int> labels) const {
    return run(logits, labels, static_cast<T*>(nullptr));
  }

 private:
  template <class T, ShapeType S>
  static T run(TensorView<const T, S, Cpu> logits, std::span<const int> labels, T* grad) {
    static_assert(check::class_scores<S>());
    constexpr int classes = S::dims[0];
    const int batch = logits.batch();
    detail::check_labels(labels, batch, classes, "etnn::loss::CrossEntropy");
    const T scale = T(1) / static_cast<T>(batch);
    T total = 0;
    for (int b = 0; b < batch; ++b) {
      T* g = grad != nullptr ? grad + static_cast<std::size_t>(b) * classes : nullptr;
      total += detail::cross_entropy_row(logits.sample(b), classes, labels[static_cast<std::size_t>(b)], g, scale);
    }
    return total * scale;
  }
};

}  // namespace etnn::loss
