#pragma once
// Metrics accumulate over batches of model outputs and targets; etnn::evaluate drives them.
//   float acc = etnn::evaluate(model, test, etnn::metrics::accuracy);
#include <cstddef>
#include <span>
#include <string>

#include "../core/error.hpp"
#include "../core/static_checks.hpp"
#include "../tensor/tensor.hpp"

namespace etnn::metrics {

// Fraction of samples whose highest score is the label (ties: the first maximum).
struct Accuracy {
  std::size_t correct = 0;
  std::size_t total = 0;

  template <class T, ShapeType S>
  void update(TensorView<const T, S, Cpu> scores, std::span<const int> labels) {
    static_assert(check::class_scores<S>());
    if (labels.size() != static_cast<std::size_t>(scores.batch()))
      throw ShapeError("etnn::metrics::Accuracy: " + std::to_string(labels.size()) + " labels for " +
                       std::to_string(scores.batch()) + " score rows; pass one label per row");
    for (int b = 0; b < scores.batch(); ++b) {
      const T* row = scores.sample(b);
      int best = 0;
      for (int j = 1; j < S::dims[0]; ++j) best = row[j] > row[best] ? j : best;
      correct += best == labels[static_cast<std::size_t>(b)] ? 1 : 0;
    }
    total += static_cast<std::size_t>(scores.batch());
  }

  double result() const { return total == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(total); }
};

inline constexpr Accuracy accuracy{};

}  // namespace etnn::metrics
