// Metrics: top-k accuracy (also through etnn::evaluate), micro F1 of multi-label predictions,
// mean absolute error; hand-computed values and error messages.
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
