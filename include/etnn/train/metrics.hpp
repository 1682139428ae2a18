#pragma once
// Private to train/: include <etnn/train/train.hpp> or <etnn/etnn.hpp>.
// Metrics accumulate over batches of model outputs and targets, then give one number. Each is a
// value type with update(outputs, targets) and result(); etnn::evaluate drives those that take
// class indices (a Dataset's labels):
//   float acc = etnn::evaluate(model, test, etnn::metrics::accuracy);
//   float top5 = etnn::evaluate(model, test, etnn::metrics::top_k_accuracy(5));
// Those that take targets of the output's shape are driven by the caller:
//   etnn::metrics::MeanAbsoluteError mae;
//   for (...) mae.update(etnn::const_view(model.forward(x)), etnn::const_view(y));
//   double error = mae.result();
#include <cmath>
#include <cstddef>
#include <span>
#include <string>

#include "../core/error.hpp"
#include "../loss/checks.hpp"
#include "../tensor/tensor.hpp"

namespace etnn::metrics {

namespace detail {
using etnn::detail::message;

inline void check_label_count(std::span<const int> labels, int rows, const char* who) {
  if (labels.size() != static_cast<std::size_t>(rows))
    throw ShapeError(message(who, std::to_string(labels.size()), " labels for ", std::to_string(rows),
                             " score rows; pass one label per row"));
}

template <class T, ShapeType S, class U, ShapeType TS>
void check_target_rows(TensorView<const T, S, Cpu> outputs, TensorView<const U, TS, Cpu> targets, const char* who) {
  static_assert(loss::check::target_shape<TS, S>());
  if (outputs.batch() != targets.batch())
    throw ShapeError(message(who, std::to_string(targets.batch()), " target rows for ",
                             std::to_string(outputs.batch()), " output rows; pass one target row per sample"));
}
}  // namespace detail

// Fraction of samples whose highest score is the label (ties: the first maximum).
//   scores: (B, C)   labels: B class indices
struct Accuracy {
  std::size_t correct = 0;
  std::size_t total = 0;

  template <class T, ShapeType S>
  void update(TensorView<const T, S, Cpu> scores, std::span<const int> labels) {
    static_assert(loss::check::class_scores<S>());
    detail::check_label_count(labels, scores.batch(), "etnn::metrics::Accuracy");
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

// Fraction of samples whose label is among the k highest scores. Equal scores rank by class
// index (a stable sort, descending), so k = 1 is Accuracy; a label outside [0, C) never counts.
//   scores: (B, C)   labels: B class indices   1 <= k <= C
struct TopKAccuracy {
  int k = 5;
  std::size_t correct = 0;
  std::size_t total = 0;

  template <class T, ShapeType S>
  void update(TensorView<const T, S, Cpu> scores, std::span<const int> labels) {
    static_assert(loss::check::class_scores<S>());
    constexpr int classes = S::dims[0];
    if (k < 1 || k > classes)
      throw Error(detail::message("etnn::metrics::TopKAccuracy", "k = ", std::to_string(k), " is outside [1, ",
                                  std::to_string(classes), "]; the network has ", std::to_string(classes),
                                  " outputs"));
    detail::check_label_count(labels, scores.batch(), "etnn::metrics::TopKAccuracy");
    for (int b = 0; b < scores.batch(); ++b) {
      const T* row = scores.sample(b);
      const int y = labels[static_cast<std::size_t>(b)];
      if (y < 0 || y >= classes) continue;
      int rank = 0;  // classes ranked before the label
      for (int j = 0; j < classes; ++j) rank += row[j] > row[y] || (row[j] == row[y] && j < y) ? 1 : 0;
      correct += rank < k ? 1 : 0;
    }
    total += static_cast<std::size_t>(scores.batch());
  }

  double result() const { return total == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(total); }
};

inline TopKAccuracy top_k_accuracy(int k) {
  if (k < 1) throw Error(detail::message("etnn::metrics::top_k_accuracy", "k must be >= 1, got ", std::to_string(k)));
  return {.k = k};
}

// Micro-averaged F1 of multi-label predictions: output c of a sample predicts its label c when
// the logit is > 0 (probability > 0.5 after a sigmoid).
//   F1 = 2 TP / (2 TP + FP + FN), counted over every (sample, label); 0 when there is nothing to
//   count (no positive label and no positive prediction), as scikit-learn's zero_division default.
//   logits: (B, C)   targets: (B, C) of 0 and 1
struct MultiLabelF1 {
  std::size_t true_positives = 0;
  std::size_t false_positives = 0;
  std::size_t false_negatives = 0;

  template <class T, ShapeType S, class U, ShapeType TS>
  void update(TensorView<const T, S, Cpu> logits, TensorView<const U, TS, Cpu> targets) {
    detail::check_target_rows(logits, targets, "etnn::metrics::MultiLabelF1");
    const T* z = logits.data();
    const U* t = targets.data();
    for (std::size_t i = 0; i < logits.size(); ++i) {
      if (t[i] != U(0) && t[i] != U(1))
        throw Error(detail::message("etnn::metrics::MultiLabelF1", "target element ", std::to_string(i), " is ",
                                    std::to_string(t[i]), "; multi-label targets are 0 or 1"));
      const bool predicted = z[i] > T(0);
      const bool actual = t[i] == U(1);
      true_positives += predicted && actual ? 1 : 0;
      false_positives += predicted && !actual ? 1 : 0;
      false_negatives += !predicted && actual ? 1 : 0;
    }
  }

  double result() const {
    const std::size_t denominator = 2 * true_positives + false_positives + false_negatives;
    return denominator == 0 ? 0.0 : 2.0 * static_cast<double>(true_positives) / static_cast<double>(denominator);
  }
};

inline constexpr MultiLabelF1 multilabel_f1{};

// Mean of |output - target| over every element of every sample, summed in double.
//   outputs, targets: (B, S...)
struct MeanAbsoluteError {
  double sum = 0;
  std::size_t count = 0;

  template <class T, ShapeType S, class U, ShapeType TS>
  void update(TensorView<const T, S, Cpu> outputs, TensorView<const U, TS, Cpu> targets) {
    detail::check_target_rows(outputs, targets, "etnn::metrics::MeanAbsoluteError");
    const T* y = outputs.data();
    const U* t = targets.data();
    for (std::size_t i = 0; i < outputs.size(); ++i) sum += std::abs(static_cast<double>(y[i]) - static_cast<double>(t[i]));
    count += outputs.size();
  }

  double result() const { return count == 0 ? 0.0 : sum / static_cast<double>(count); }
};

inline constexpr MeanAbsoluteError mean_absolute_error{};

}  // namespace etnn::metrics
