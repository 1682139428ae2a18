// Metrics: top-k accuracy, micro and macro F1 of multi-label predictions, mean absolute and squared
// error, R^2; hand-computed values, error messages, and etnn::evaluate over each kind of target.
#include <doctest/doctest.h>

#include <span>
#include <vector>

#include "support/gradcheck.hpp"

using etnn::Shape;
using etnn::Tensor;
namespace metrics = etnn::metrics;

namespace {
template <int C>
Tensor<float, Shape<C>> rows(const std::vector<std::vector<float>>& values) {
  Tensor<float, Shape<C>> t(static_cast<int>(values.size()));
  for (std::size_t b = 0; b < values.size(); ++b)
    for (int c = 0; c < C; ++c) t(static_cast<int>(b), c) = values[b][static_cast<std::size_t>(c)];
  return t;
}
}  // namespace

TEST_CASE("top-k accuracy: the label among the k highest scores, ties ranked by class index") {
  const auto scores = rows<4>({{0.1f, 0.9f, 0.5f, 0.3f},    // label 2 is second
                               {0.7f, 0.7f, 0.1f, 0.2f},    // label 1 ties with class 0: second
                               {0.4f, 0.3f, 0.2f, 0.1f},    // label 3 is last
                               {0.0f, 0.0f, 0.0f, 0.0f}});  // all tied: label 0 is first
  const std::vector<int> labels{2, 1, 3, 0};
  const double expected[] = {0.25, 0.75, 0.75, 1.0};  // k = 1 .. 4
  for (int k = 1; k <= 4; ++k) {
    CAPTURE(k);
    auto m = metrics::top_k_accuracy(k);
    m.update(etnn::const_view(scores), std::span<const int>(labels));
    CHECK(m.result() == expected[k - 1]);
  }
  // k = 1 is Accuracy, ties included.
  auto acc = metrics::accuracy;
  acc.update(etnn::const_view(scores), std::span<const int>(labels));
  CHECK(acc.result() == expected[0]);
  // Accumulates over batches.
  metrics::TopKAccuracy two{.k = 2};
  two.update(etnn::const_view(scores), std::span<const int>(labels));
  two.update(etnn::const_view(scores), std::span<const int>(labels));
  CHECK(two.total == 8);
  CHECK(two.result() == 0.75);
  CHECK(metrics::TopKAccuracy{}.result() == 0.0);
}

TEST_CASE("top-k accuracy rejects k outside [1, C] and a label count that differs from the rows") {
  const auto scores = rows<3>({{1, 2, 3}});
  const std::vector<int> labels{0};
  CHECK_THROWS_WITH_AS(metrics::top_k_accuracy(0), doctest::Contains("k must be >= 1, got 0"), etnn::Error);
  metrics::TopKAccuracy five{.k = 5};
  CHECK_THROWS_WITH_AS(five.update(etnn::const_view(scores), std::span<const int>(labels)),
                       doctest::Contains("k = 5 is outside [1, 3]"), etnn::Error);
  const std::vector<int> two_labels{0, 1};
  CHECK_THROWS_WITH_AS(metrics::top_k_accuracy(1).update(etnn::const_view(scores), std::span<const int>(two_labels)),
                       doctest::Contains("2 labels for 1 score rows"), etnn::ShapeError);
}

TEST_CASE("etnn::evaluate drives top-k accuracy like accuracy") {
  namespace nn = etnn::nn;
  etnn::Model<decltype(nn::input<2> >> nn::linear<5>)> model(3);
  std::vector<float> x(2 * 50);
  etnn::test::fill_uniform(x.data(), x.size(), 1);
  std::vector<int> y(50);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int>(i % 5);
  const etnn::data::Dataset<Shape<2>> data(x, y);
  metrics::TopKAccuracy manual{.k = 3};
  Tensor<float, Shape<2>> batch(50);
  std::copy(x.begin(), x.end(), batch.data());
  manual.update(etnn::const_view(model.forward(batch)), std::span<const int>(y));
  CHECK(etnn::evaluate(model, data, metrics::top_k_accuracy(3), 16) == manual.result());
  CHECK(etnn::evaluate(model, data, metrics::top_k_accuracy(5)) == 1.0);
  CHECK(etnn::evaluate(model, data, metrics::top_k_accuracy(1)) == etnn::evaluate(model, data, metrics::accuracy));
}

TEST_CASE("multi-label F1: micro average, a label predicted where its logit is > 0") {
  const auto logits = rows<3>({{2.0f, -1.0f, 0.5f},     // predicts 0 and 2
                               {-0.5f, 0.0f, 3.0f}});  // predicts 2 (0 is not > 0)
  const auto targets = rows<3>({{1, 1, 0},             // TP 1, FN 1, FP 1
                                {0, 1, 1}});           // FN 1, TP 1
  auto f1 = metrics::multilabel_f1;
  f1.update(etnn::const_view(logits), etnn::const_view(targets));
  CHECK(f1.true_positives == 2);
  CHECK(f1.false_positives == 1);
  CHECK(f1.false_negatives == 2);
  CHECK(f1.result() == doctest::Approx(2.0 * 2 / (2 * 2 + 1 + 2)));
  // Targets of another scalar type than the logits.
  Tensor<double, Shape<3>> double_targets(2);
  std::copy(targets.data(), targets.data() + targets.size(), double_targets.data());
  metrics::MultiLabelF1 again;
  again.update(etnn::const_view(logits), etnn::const_view(double_targets));
  CHECK(again.result() == f1.result());
  // Nothing to count: 0, like scikit-learn's default.
  const auto negative = rows<3>({{-1, -1, -1}});
  const auto none = rows<3>({{0, 0, 0}});
  metrics::MultiLabelF1 empty;
  empty.update(etnn::const_view(negative), etnn::const_view(none));
  CHECK(empty.result() == 0.0);
}

TEST_CASE("multi-label F1 rejects targets other than 0 and 1 and a row count that differs") {
  const auto logits = rows<2>({{1, -1}});
  const auto soft = rows<2>({{0.5f, 1}});
  CHECK_THROWS_WITH_AS(metrics::MultiLabelF1{}.update(etnn::const_view(logits), etnn::const_view(soft)),
                       doctest::Contains("target element 0 is 0.500000; multi-label targets are 0 or 1"), etnn::Error);
  const auto two = rows<2>({{1, 0}, {0, 1}});
  CHECK_THROWS_WITH_AS(metrics::MultiLabelF1{}.update(etnn::const_view(logits), etnn::const_view(two)),
                       doctest::Contains("2 target rows for 1 output rows"), etnn::ShapeError);
}

TEST_CASE("mean absolute error over every element, accumulated over batches") {
  const auto out = rows<2>({{1.0f, -2.0f}, {0.5f, 4.0f}});
  const auto target = rows<2>({{0.0f, -2.5f}, {1.5f, 0.0f}});
  auto mae = metrics::mean_absolute_error;
  CHECK(mae.result() == 0.0);
  mae.update(etnn::const_view(out), etnn::const_view(target));
  CHECK(mae.result() == doctest::Approx((1.0 + 0.5 + 1.0 + 4.0) / 4));
  mae.update(etnn::const_view(out), etnn::const_view(out));
  CHECK(mae.count == 8);
  CHECK(mae.result() == doctest::Approx((1.0 + 0.5 + 1.0 + 4.0) / 8));
}

TEST_CASE("accuracy and top-k accuracy reject a label outside [0, C), also through etnn::evaluate") {
  const auto scores = rows<3>({{0.1f, 0.5f, 0.2f}, {0.3f, 0.1f, 0.0f}});
  const std::vector<int> labels{1, 3};
  CHECK_THROWS_WITH_AS(metrics::Accuracy{}.update(etnn::const_view(scores), std::span<const int>(labels)),
                       doctest::Contains("label 3 of row 1 is outside [0, 3)"), etnn::ShapeError);
  CHECK_THROWS_WITH_AS(metrics::TopKAccuracy{.k = 2}.update(etnn::const_view(scores), std::span<const int>(labels)),
                       doctest::Contains("label 3 of row 1 is outside [0, 3)"), etnn::ShapeError);
  namespace nn = etnn::nn;
  etnn::Model<decltype(nn::input<2> >> nn::linear<3>)> model(3);
  const etnn::data::Dataset<Shape<2>> data(std::vector<float>(2 * 10, 0.5f), {0, 1, 2, 0, 1, 2, 0, 1, 7, 0});
  CHECK_THROWS_WITH_AS(etnn::evaluate(model, data, metrics::accuracy, 4), doctest::Contains("label 7 of row 0"),
                       etnn::ShapeError);
}

TEST_CASE("mean squared error and R^2 against hand-computed values, accumulated over batches") {
  // Per output j: R2_j = 1 - SS_res / SS_tot.
  //   output 0: t = 0, 1.5, 2.5 (mean 4/3): SS_tot = 19/6, SS_res = 1 + 1 + 1/4 = 9/4, R2 = 11/38
  //   output 1: t = -2.5, 0, 3 (mean 1/6): SS_tot = 91/6, SS_res = 1/4 + 16 + 4 = 81/4, R2 = -61/182
  const auto out = rows<2>({{1.0f, -2.0f}, {0.5f, 4.0f}, {2.0f, 1.0f}});
  const auto target = rows<2>({{0.0f, -2.5f}, {1.5f, 0.0f}, {2.5f, 3.0f}});
  auto mse = metrics::mean_squared_error;
  mse.update(etnn::const_view(out), etnn::const_view(target));
  CHECK(mse.result() == doctest::Approx((9.0 / 4 + 81.0 / 4) / 6));
  auto r2 = metrics::r2_score;
  CHECK(r2.result() == 0.0);
  using Rows = etnn::TensorView<const float, Shape<2>>;
  r2.update(Rows(out.data(), 1), Rows(target.data(), 1));
  r2.update(Rows(out.data() + 2, 2), Rows(target.data() + 2, 2));
  CHECK(r2.result() == doctest::Approx((11.0 / 38 - 61.0 / 182) / 2).epsilon(1e-12));
  // A perfect fit scores 1; constant targets score 1 when predicted exactly, else 0.
  auto perfect = metrics::r2_score;
  perfect.update(etnn::const_view(target), etnn::const_view(target));
  CHECK(perfect.result() == 1.0);
  const auto constant = rows<1>({{2.0f}, {2.0f}});
  auto exact = metrics::r2_score, off = metrics::r2_score;
  exact.update(etnn::const_view(constant), etnn::const_view(constant));
  off.update(etnn::const_view(rows<1>({{2.0f}, {3.0f}})), etnn::const_view(constant));
  CHECK(exact.result() == 1.0);
  CHECK(off.result() == 0.0);
  // Targets far from 0 keep their precision (the sums are shifted by the first target).
  auto far = metrics::r2_score;
  far.update(etnn::const_view(rows<1>({{1e6f + 1}, {1e6f + 1}, {1e6f + 3}})),
             etnn::const_view(rows<1>({{1e6f}, {1e6f + 2}, {1e6f + 4}})));
  CHECK(far.result() == doctest::Approx(1.0 - 3.0 / 8.0).epsilon(1e-12));
}

TEST_CASE("multi-label macro F1 averages each label's F1; micro F1 pools the counts") {
  // label 0: predicted 1 0 1, actual 1 1 0 -> TP 1 FP 1 FN 1, F1 1/2
  // label 1: predicted 0 1 0, actual 0 1 0 -> TP 1,           F1 1
  // label 2: predicted 1 0 0, actual 0 0 0 -> FP 1,           F1 0
  const auto logits = rows<3>({{1, -1, 2}, {-1, 1, -1}, {2, -1, -1}});
  const auto targets = rows<3>({{1, 0, 0}, {1, 1, 0}, {0, 0, 0}});
  auto macro = metrics::multilabel_macro_f1;
  CHECK(macro.result() == 0.0);
  macro.update(etnn::const_view(logits), etnn::const_view(targets));
  CHECK(macro.result() == doctest::Approx(0.5));
  auto micro = metrics::multilabel_f1;
  micro.update(etnn::const_view(logits), etnn::const_view(targets));
  CHECK(micro.result() == doctest::Approx(4.0 / 7.0));  // TP 2, FP 2, FN 1
  CHECK_THROWS_WITH_AS(macro.update(etnn::const_view(rows<2>({{1, 1}})), etnn::const_view(rows<2>({{1, 0}}))),
                       doctest::Contains("samples of 2 outputs after samples of 3"), etnn::ShapeError);
}

TEST_CASE("etnn::evaluate drives the metrics of real-valued and multi-hot datasets like a hand-written pass") {
  namespace nn = etnn::nn;
  etnn::Model<decltype(nn::input<2> >> nn::linear<3>)> model(5);
  constexpr int n = 37;
  std::vector<float> x(2 * n), real(3 * n), hot(3 * n);
  etnn::test::fill_uniform(x.data(), x.size(), 2);
  etnn::test::fill_uniform(real.data(), real.size(), 3);
  for (std::size_t i = 0; i < hot.size(); ++i) hot[i] = static_cast<float>((i * 7) % 3 == 0);
  const etnn::data::Dataset<Shape<2>, Shape<3>> regression(x, real);
  const etnn::data::Dataset<Shape<2>, etnn::data::MultiHot<3>> multilabel(x, hot);
  Tensor<float, Shape<2>> all(n);
  std::copy(x.begin(), x.end(), all.data());
  const auto out = model.forward(all);
  const etnn::TensorView<const float, Shape<3>> real_view(real.data(), n), hot_view(hot.data(), n);
  const auto manual = [&](auto metric, auto targets) {
    metric.update(etnn::const_view(out), targets);
    return metric.result();
  };
  CHECK(etnn::evaluate(model, regression, metrics::mean_absolute_error, 8) ==
        doctest::Approx(manual(metrics::mean_absolute_error, real_view)).epsilon(1e-12));
  CHECK(etnn::evaluate(model, regression, metrics::mean_squared_error, 8) ==
        doctest::Approx(manual(metrics::mean_squared_error, real_view)).epsilon(1e-12));
  CHECK(etnn::evaluate(model, regression, metrics::r2_score, 8) ==
        doctest::Approx(manual(metrics::r2_score, real_view)).epsilon(1e-12));
  CHECK(etnn::evaluate(model, multilabel, metrics::multilabel_f1, 8) == manual(metrics::multilabel_f1, hot_view));
  CHECK(etnn::evaluate(model, multilabel, metrics::multilabel_macro_f1, 8) ==
        manual(metrics::multilabel_macro_f1, hot_view));
}
