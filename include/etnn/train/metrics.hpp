#pragma once
// Private to train/: include <etnn/train/train.hpp> or <etnn/etnn.hpp>.
// Metrics accumulate over batches of model outputs and targets, then give one number. Each is a
// value type with update(outputs, targets) and result(); etnn::evaluate drives them over a dataset
// of the matching kind of target (data/targets.hpp):
//   class indices (Dataset<X>):                   accuracy, top_k_accuracy(k)
//   real-valued rows (Dataset<X, Shape<K...>>):   mean_absolute_error, mean_squared_error, r2_score
//   multi-hot rows (Dataset<X, MultiHot<K>>):     multilabel_f1 (micro), multilabel_macro_f1
//   double acc = etnn::evaluate(model, test, etnn::metrics::accuracy);
// or the caller drives them batch by batch:
//   etnn::metrics::MeanAbsoluteError mae;
//   for (...) mae.update(etnn::const_view(model.forward(x)), etnn::const_view(y));
//   double error = mae.result();
// A class index outside [0, C) is an error (etnn::ShapeError), as is a multi-hot target other than
// 0 or 1.
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

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

// Label y of score row `row` must be a class of the C scores.
inline void check_label(int y, int classes, int row, const char* who) {
  if (y < 0 || y >= classes)
    throw ShapeError(message(who, "label ", std::to_string(y), " of row ", std::to_string(row), " is outside [0, ",
                             std::to_string(classes), "): the network has ", std::to_string(classes),
                             " outputs; is this the test set of the same task?"));
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
      detail::check_label(labels[static_cast<std::size_t>(b)], S::dims[0], b, "etnn::metrics::Accuracy");
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
// index (a stable sort, descending), so k = 1 is Accuracy.
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
      detail::check_label(y, classes, b, "etnn::metrics::TopKAccuracy");
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

namespace detail {
// Calls f(i, output i, target i) for every element i of every sample (row-major over the batch),
// after checking that there is one target row per output row.
template <class T, ShapeType S, class U, ShapeType TS, class F>
void for_each_element(TensorView<const T, S, Cpu> outputs, TensorView<const U, TS, Cpu> targets, const char* who,
                      F&& f) {
  check_target_rows(outputs, targets, who);
  const T* y = outputs.data();
  const U* t = targets.data();
  for (std::size_t i = 0; i < outputs.size(); ++i) f(i, y[i], t[i]);
}

// Calls count(c, predicted, actual) for every element of every sample, c its index within the
// sample: output c predicts label c when its logit is > 0 (probability > 0.5 after a sigmoid).
template <class T, ShapeType S, class U, ShapeType TS, class Count>
void count_multilabel(TensorView<const T, S, Cpu> logits, TensorView<const U, TS, Cpu> targets, const char* who,
                      Count&& count) {
  for_each_element(logits, targets, who, [&](std::size_t i, T z, U t) {
    if (t != U(0) && t != U(1))
      throw Error(message(who, "target element ", std::to_string(i), " is ", std::to_string(t),
                          "; multi-label targets are 0 or 1"));
    count(i % S::size, z > T(0), t == U(1));
  });
}

// F1 = 2 TP / (2 TP + FP + FN); 0 when there is nothing to count (no positive label and no
// positive prediction), as scikit-learn's zero_division default.
inline double f1(std::size_t true_positives, std::size_t false_positives, std::size_t false_negatives) {
  const std::size_t denominator = 2 * true_positives + false_positives + false_negatives;
  return denominator == 0 ? 0.0 : 2.0 * static_cast<double>(true_positives) / static_cast<double>(denominator);
}

// Per-output accumulators, sized by the first update's sample size; later updates must match it.
inline void size_per_output(std::vector<double>& sums, std::size_t outputs, std::size_t per_output_sums, const char* who) {
  if (sums.empty()) sums.assign(outputs * per_output_sums, 0.0);
  if (sums.size() != outputs * per_output_sums)
    throw ShapeError(message(who, "samples of ", std::to_string(outputs), " outputs after samples of ",
                             std::to_string(sums.size() / per_output_sums), "; use one metric object per model"));
}
}  // namespace detail

// Micro-averaged F1 of multi-label predictions: TP, FP and FN counted over every (sample, label),
// then F1 = 2 TP / (2 TP + FP + FN) (scikit-learn's f1_score(average="micro")).
//   logits: (B, C)   targets: (B, C) of 0 and 1
struct MultiLabelF1 {
  std::size_t true_positives = 0;
  std::size_t false_positives = 0;
  std::size_t false_negatives = 0;

  template <class T, ShapeType S, class U, ShapeType TS>
  void update(TensorView<const T, S, Cpu> logits, TensorView<const U, TS, Cpu> targets) {
    detail::count_multilabel(logits, targets, "etnn::metrics::MultiLabelF1", [&](std::size_t, bool predicted, bool actual) {
      true_positives += predicted && actual ? 1 : 0;
      false_positives += predicted && !actual ? 1 : 0;
      false_negatives += !predicted && actual ? 1 : 0;
    });
  }

  double result() const { return detail::f1(true_positives, false_positives, false_negatives); }
};

inline constexpr MultiLabelF1 multilabel_f1{};

// Macro-averaged F1: F1 of each label c over the samples, then their mean over the C labels
// (scikit-learn's f1_score(average="macro"); a label never present nor predicted scores 0).
//   logits: (B, C)   targets: (B, C) of 0 and 1
struct MultiLabelMacroF1 {
  std::vector<double> counts;  // per label c: TP, FP, FN at 3c, 3c + 1, 3c + 2

  template <class T, ShapeType S, class U, ShapeType TS>
  void update(TensorView<const T, S, Cpu> logits, TensorView<const U, TS, Cpu> targets) {
    constexpr const char* who = "etnn::metrics::MultiLabelMacroF1";
    detail::size_per_output(counts, S::size, 3, who);
    detail::count_multilabel(logits, targets, who, [&](std::size_t c, bool predicted, bool actual) {
      counts[3 * c] += predicted && actual ? 1 : 0;
      counts[3 * c + 1] += predicted && !actual ? 1 : 0;
      counts[3 * c + 2] += !predicted && actual ? 1 : 0;
    });
  }

  double result() const {
    if (counts.empty()) return 0.0;
    double sum = 0;
    for (std::size_t c = 0; c < counts.size() / 3; ++c) {
      sum += detail::f1(static_cast<std::size_t>(counts[3 * c]), static_cast<std::size_t>(counts[3 * c + 1]),
                        static_cast<std::size_t>(counts[3 * c + 2]));
    }
    return sum / static_cast<double>(counts.size() / 3);
  }
};

inline constexpr MultiLabelMacroF1 multilabel_macro_f1{};

namespace detail {
// Calls f(output - target) in double for every element of every sample.
template <class T, ShapeType S, class U, ShapeType TS, class F>
void for_each_residual(TensorView<const T, S, Cpu> outputs, TensorView<const U, TS, Cpu> targets, const char* who,
                       F&& f) {
  for_each_element(outputs, targets, who,
                   [&](std::size_t, T y, U t) { f(static_cast<double>(y) - static_cast<double>(t)); });
}
}  // namespace detail

// Mean of |output - target| over every element of every sample, summed in double.
//   outputs, targets: (B, S...)
struct MeanAbsoluteError {
  double sum = 0;
  std::size_t count = 0;

  template <class T, ShapeType S, class U, ShapeType TS>
  void update(TensorView<const T, S, Cpu> outputs, TensorView<const U, TS, Cpu> targets) {
    detail::for_each_residual(outputs, targets, "etnn::metrics::MeanAbsoluteError", [&](double d) { sum += std::abs(d); });
    count += outputs.size();
  }

  double result() const { return count == 0 ? 0.0 : sum / static_cast<double>(count); }
};

inline constexpr MeanAbsoluteError mean_absolute_error{};

// Mean of (output - target)^2 over every element of every sample, summed in double (its square
// root is the RMSE).
//   outputs, targets: (B, S...)
struct MeanSquaredError {
  double sum = 0;
  std::size_t count = 0;

  template <class T, ShapeType S, class U, ShapeType TS>
  void update(TensorView<const T, S, Cpu> outputs, TensorView<const U, TS, Cpu> targets) {
    detail::for_each_residual(outputs, targets, "etnn::metrics::MeanSquaredError", [&](double d) { sum += d * d; });
    count += outputs.size();
  }

  double result() const { return count == 0 ? 0.0 : sum / static_cast<double>(count); }
};

inline constexpr MeanSquaredError mean_squared_error{};

// Coefficient of determination, per output j over the n samples, averaged over the outputs
// (scikit-learn's r2_score, multioutput="uniform_average"):
//   R2_j = 1 - SS_res / SS_tot,  SS_res = sum_i (y_ij - t_ij)^2,  SS_tot = sum_i (t_ij - mean_i t_ij)^2
// SS_tot is accumulated shifted by each output's first target, s = t - t_0j:
//   SS_tot = sum s^2 - (sum s)^2 / n,
// which keeps it accurate for targets far from 0. An output with constant targets (SS_tot = 0)
// scores 1 if predicted exactly, else 0 (scikit-learn's force_finite).
//   outputs, targets: (B, S...)
struct R2Score {
  std::vector<double> sums;  // per output j: SS_res, sum s, sum s^2, t_0j at 4j .. 4j + 3
  std::size_t samples = 0;

  template <class T, ShapeType S, class U, ShapeType TS>
  void update(TensorView<const T, S, Cpu> outputs, TensorView<const U, TS, Cpu> targets) {
    constexpr const char* who = "etnn::metrics::R2Score";
    detail::size_per_output(sums, S::size, 4, who);
    detail::for_each_element(outputs, targets, who, [&](std::size_t i, T y, U t) {
      double* out = sums.data() + 4 * (i % S::size);
      if (samples == 0 && i < S::size) out[3] = static_cast<double>(t);
      const double residual = static_cast<double>(y) - static_cast<double>(t);
      const double shifted = static_cast<double>(t) - out[3];
      out[0] += residual * residual;
      out[1] += shifted;
      out[2] += shifted * shifted;
    });
    samples += static_cast<std::size_t>(outputs.batch());
  }

  double result() const {
    if (samples == 0) return 0.0;
    double sum = 0;
    const std::size_t outputs = sums.size() / 4;
    for (std::size_t j = 0; j < outputs; ++j) {
      const double* s = sums.data() + 4 * j;
      const double total = s[2] - s[1] * s[1] / static_cast<double>(samples);
      sum += total > 0 ? 1.0 - s[0] / total : (s[0] == 0 ? 1.0 : 0.0);
    }
    return sum / static_cast<double>(outputs);
  }
};

inline constexpr R2Score r2_score{};

}  // namespace etnn::metrics
