// Losses: value against a naive formula written here, gradient against central differences
// (double, PyTorch's gradcheck tolerances), numerical extremes in float, option and target
// validation. PyTorch's own numbers are checked in test_torch_reference.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "support/gradcheck.hpp"

using etnn::Shape;
using etnn::Tensor;
using etnn::loss::Reduction;
namespace loss = etnn::loss;

namespace {
constexpr int B = 3;
constexpr int C = 4;
using Scores = Tensor<double, Shape<C>>;
constexpr Reduction reductions[] = {Reduction::mean, Reduction::sum};

Scores uniform(std::uint64_t seed, double scale = 1.0) {
  Scores t(B);
  etnn::test::fill_uniform(t.data(), t.size(), seed, scale);
  return t;
}

double reduce(double total, double count, Reduction r) { return r == Reduction::mean ? total / count : total; }
double sigmoid(double z) { return 1 / (1 + std::exp(-z)); }

// value_and_grad's value equals value(), and its gradient equals central differences of value()
// with respect to every input element: |analytic - numeric| <= atol + rtol |numeric|.
template <class Loss, class Targets>
void check_gradient(const Loss& l, Scores& x, const Targets& targets) {
  std::vector<double> grad(x.size());
  const double value = l.value_and_grad(etnn::Cpu{}, etnn::const_view(x), targets, grad.data());
  CHECK(l.value(etnn::Cpu{}, etnn::const_view(x), targets) == value);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x.data()[i];
    x.data()[i] = saved + etnn::test::grad_eps;
    const double up = l.value(etnn::Cpu{}, etnn::const_view(x), targets);
    x.data()[i] = saved - etnn::test::grad_eps;
    const double down = l.value(etnn::Cpu{}, etnn::const_view(x), targets);
    x.data()[i] = saved;
    const double numeric = (up - down) / (2 * etnn::test::grad_eps);
    CAPTURE(i);
    CHECK(std::abs(grad[i] - numeric) <= etnn::test::grad_atol + etnn::test::grad_rtol * std::abs(numeric));
  }
}

template <class Loss, class Targets>
double value_of(const Loss& l, const Scores& x, const Targets& targets) {
  return l.value(etnn::Cpu{}, etnn::const_view(x), targets);
}

// Naive references: the textbook formulas, one element or row at a time.
template <class F>
double naive_elementwise(const Scores& x, const Scores& t, Reduction r, F f) {
  double total = 0;
  for (std::size_t i = 0; i < x.size(); ++i) total += f(x.data()[i], t.data()[i]);
  return reduce(total, static_cast<double>(x.size()), r);
}

// -log softmax(z_b)_c, directly from the definition.
double neg_log_softmax(const Scores& z, int b, int c) {
  double sum = 0;
  for (int j = 0; j < C; ++j) sum += std::exp(z(b, j));
  return -std::log(std::exp(z(b, c)) / sum);
}

// torch.nn.functional.cross_entropy: (1 - eps) weighted NLL + eps/C weighted sum over classes,
// both divided by sum_b w[y_b] for the mean.
double naive_cross_entropy(const Scores& z, const std::vector<int>& y, Reduction r, double eps,
                           const std::vector<double>& w) {
  double nll = 0, smooth = 0, weights = 0;
  for (int b = 0; b < B; ++b) {
    const int label = y[static_cast<std::size_t>(b)];
    nll += w[static_cast<std::size_t>(label)] * neg_log_softmax(z, b, label);
    weights += w[static_cast<std::size_t>(label)];
    for (int c = 0; c < C; ++c) smooth += w[static_cast<std::size_t>(c)] * neg_log_softmax(z, b, c);
  }
  const double total = (1 - eps) * nll + eps / C * smooth;
  return r == Reduction::mean ? total / weights : total;
}

const std::vector<int> labels{3, 0, 2};
const std::vector<float> weight{0.5f, 2.0f, 1.0f, 0.25f};
const std::vector<double> weight_d(weight.begin(), weight.end());
const std::vector<double> ones(C, 1.0);
std::span<const int> label_span() { return labels; }
}  // namespace

TEST_CASE("CrossEntropy: value against the definition, gradient, with smoothing and weights") {
  Scores z = uniform(4, 3.0);
  for (Reduction r : reductions) {
    for (float eps : {0.0f, 0.2f}) {
      for (bool weighted : {false, true}) {
        CAPTURE(eps);
        CAPTURE(weighted);
        const loss::CrossEntropy ce({.reduction = r, .label_smoothing = eps, .weight = weighted ? weight : std::vector<float>{}});
        CHECK(value_of(ce, z, label_span()) ==
              doctest::Approx(naive_cross_entropy(z, labels, r, eps, weighted ? weight_d : ones)).epsilon(1e-12));
        check_gradient(ce, z, label_span());
      }
    }
  }
  // Each row's gradient sums to zero without weights: softmax and the smoothed target sum to one.
  std::vector<double> grad(z.size());
  loss::CrossEntropy({.label_smoothing = 0.3f}).value_and_grad(etnn::Cpu{}, etnn::const_view(z), label_span(), grad.data());
  for (int b = 0; b < B; ++b) CHECK(std::abs(grad[b * 4] + grad[b * 4 + 1] + grad[b * 4 + 2] + grad[b * 4 + 3]) < 1e-15);
}

TEST_CASE("NLL: value against the definition, gradient") {
  Scores x = uniform(5, 2.0);
  for (Reduction r : reductions) {
    for (bool weighted : {false, true}) {
      const std::vector<double>& w = weighted ? weight_d : ones;
      double total = 0, weights = 0;
      for (int b = 0; b < B; ++b) {
        const auto y = static_cast<std::size_t>(labels[static_cast<std::size_t>(b)]);
        total -= w[y] * x(b, static_cast<int>(y));
        weights += w[y];
      }
      const loss::NLL nll({.reduction = r, .weight = weighted ? weight : std::vector<float>{}});
      CHECK(value_of(nll, x, label_span()) == doctest::Approx(r == Reduction::mean ? total / weights : total).epsilon(1e-14));
      check_gradient(nll, x, label_span());
    }
  }
}

TEST_CASE("MultiMargin: value against the definition, gradient, p = 1 and 2") {
  Scores x = uniform(6, 1.5);
  for (Reduction r : reductions) {
    for (int p : {1, 2}) {
      for (bool weighted : {false, true}) {
        const std::vector<double>& w = weighted ? weight_d : ones;
        double total = 0;
        for (int b = 0; b < B; ++b) {
          const int y = labels[static_cast<std::size_t>(b)];
          for (int j = 0; j < C; ++j)
            if (j != y) total += w[static_cast<std::size_t>(y)] * std::pow(std::max(0.0, 0.75 - x(b, y) + x(b, j)), p) / C;
        }
        const loss::MultiMargin mm({.reduction = r, .p = p, .margin = 0.75f, .weight = weighted ? weight : std::vector<float>{}});
        CHECK(value_of(mm, x, label_span()) == doctest::Approx(reduce(total, B, r)).epsilon(1e-14));
        check_gradient(mm, x, label_span());
      }
    }
  }
}

TEST_CASE("MSE, L1, SmoothL1, Huber: value against the definition, gradient") {
  Scores y = uniform(1, 2.0);
  const Scores t = uniform(2, 2.0);
  const auto tv = etnn::const_view(t);
  for (Reduction r : reductions) {
    CHECK(value_of(loss::MSE({.reduction = r}), y, tv) ==
          doctest::Approx(naive_elementwise(y, t, r, [](double a, double b) { return (a - b) * (a - b); })).epsilon(1e-14));
    check_gradient(loss::MSE({.reduction = r}), y, tv);
    CHECK(value_of(loss::L1({.reduction = r}), y, tv) ==
          doctest::Approx(naive_elementwise(y, t, r, [](double a, double b) { return std::abs(a - b); })).epsilon(1e-14));
    check_gradient(loss::L1({.reduction = r}), y, tv);
    for (float beta : {1.0f, 0.5f, 0.0f}) {
      CAPTURE(beta);
      const loss::SmoothL1 smooth({.reduction = r, .beta = beta});
      CHECK(value_of(smooth, y, tv) == doctest::Approx(naive_elementwise(y, t, r, [&](double a, double b) {
                                         const double d = std::abs(a - b);
                                         return d < beta ? 0.5 * d * d / beta : d - 0.5 * beta;
                                       })).epsilon(1e-14));
      check_gradient(smooth, y, tv);
    }
    for (float delta : {1.0f, 0.5f, 2.0f}) {
      CAPTURE(delta);
      const loss::Huber huber({.reduction = r, .delta = delta});
      CHECK(value_of(huber, y, tv) == doctest::Approx(naive_elementwise(y, t, r, [&](double a, double b) {
                                        const double d = std::abs(a - b);
                                        return d <= delta ? 0.5 * d * d : delta * (d - 0.5 * delta);
                                      })).epsilon(1e-14));
      check_gradient(huber, y, tv);
      // PyTorch's relation: Huber(delta) = delta * SmoothL1(beta = delta).
      CHECK(value_of(huber, y, tv) ==
            doctest::Approx(delta * value_of(loss::SmoothL1({.reduction = r, .beta = delta}), y, tv)).epsilon(1e-14));
    }
  }
}

TEST_CASE("BCEWithLogits and BCE: value against the textbook formula, gradient") {
  Scores z = uniform(7, 3.0);
  Scores t = uniform(8);
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = 0.5 + 0.5 * t.data()[i];  // [0, 1)
  const auto tv = etnn::const_view(t);
  for (Reduction r : reductions) {
    for (float pw : {1.0f, 3.0f}) {
      CAPTURE(pw);
      const loss::BCEWithLogits bce({.reduction = r, .pos_weight = pw});
      CHECK(value_of(bce, z, tv) == doctest::Approx(naive_elementwise(z, t, r, [&](double a, double b) {
                                      return -(pw * b * std::log(sigmoid(a)) + (1 - b) * std::log(1 - sigmoid(a)));
                                    })).epsilon(1e-12));
      check_gradient(bce, z, tv);
    }
    Scores p = uniform(9);
    for (std::size_t i = 0; i < p.size(); ++i) p.data()[i] = 0.5 + 0.45 * p.data()[i];  // [0.05, 0.95)
    CHECK(value_of(loss::BCE({.reduction = r}), p, tv) == doctest::Approx(naive_elementwise(p, t, r, [](double a, double b) {
                                                            return -(b * std::log(a) + (1 - b) * std::log(1 - a));
                                                          })).epsilon(1e-12));
    check_gradient(loss::BCE({.reduction = r}), p, tv);
  }
}

TEST_CASE("BCE clamps its logs at -100 like PyTorch: finite at probabilities 0 and 1") {
  Tensor<double, Shape<2>> p(1), t(1);
  p(0, 0) = 0.0;
  p(0, 1) = 1.0;
  t(0, 0) = 0.25;
  t(0, 1) = 0.5;
  std::vector<double> grad(2);
  const double value = loss::BCE({.reduction = Reduction::sum}).value_and_grad(etnn::Cpu{}, etnn::const_view(p), etnn::const_view(t), grad.data());
  CHECK(value == doctest::Approx(0.25 * 100 + 0.5 * 100));
  CHECK(grad[0] == doctest::Approx(-0.25 / static_cast<double>(1e-12f)).epsilon(1e-15));
  CHECK(grad[1] == doctest::Approx(0.5 / static_cast<double>(1e-12f)).epsilon(1e-15));
}

TEST_CASE("Hinge: value against a naive reference, gradient, targets -1 or +1") {
  Scores z = uniform(10, 2.0);
  Scores y(B);
  for (std::size_t i = 0; i < y.size(); ++i) y.data()[i] = i % 3 == 0 ? 1.0 : -1.0;
  const auto yv = etnn::const_view(y);
  for (Reduction r : reductions) {
    double total = 0;
    for (std::size_t i = 0; i < z.size(); ++i) total += std::max(0.0, 1 - y.data()[i] * z.data()[i]);
    CHECK(value_of(loss::Hinge({.reduction = r}), z, yv) == doctest::Approx(reduce(total, static_cast<double>(z.size()), r)).epsilon(1e-14));
    check_gradient(loss::Hinge({.reduction = r}), z, yv);
  }
  y(1, 2) = 0.0;
  CHECK_THROWS_WITH_AS(value_of(loss::Hinge{}, z, yv), doctest::Contains("target element 6 is 0.000000; this loss takes targets of -1"),
                       etnn::Error);
}

TEST_CASE("MultiLabelSoftMargin: value against the definition, gradient, multi-hot targets") {
  Scores z = uniform(11, 3.0);
  Scores t(B);
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = i % 3 == 1 ? 1.0 : 0.0;
  const auto tv = etnn::const_view(t);
  for (Reduction r : reductions) {
    double total = 0;
    for (int b = 0; b < B; ++b) {
      double row = 0;
      for (int c = 0; c < C; ++c) row -= t(b, c) * std::log(sigmoid(z(b, c))) + (1 - t(b, c)) * std::log(sigmoid(-z(b, c)));
      total += row / C;
    }
    CHECK(value_of(loss::MultiLabelSoftMargin({.reduction = r}), z, tv) == doctest::Approx(reduce(total, B, r)).epsilon(1e-12));
    check_gradient(loss::MultiLabelSoftMargin({.reduction = r}), z, tv);
  }
  t(0, 0) = 0.5;
  CHECK_THROWS_WITH_AS(value_of(loss::MultiLabelSoftMargin{}, z, tv), doctest::Contains("this loss takes targets of 0"),
                       etnn::Error);
}

TEST_CASE("KLDiv: value against sum t log(t / p), gradient, batchmean/mean/sum, log_target") {
  Scores x = uniform(12, 2.0);  // log-probabilities of a softmax
  for (int b = 0; b < B; ++b) {
    double sum = 0;
    for (int c = 0; c < C; ++c) sum += std::exp(x(b, c));
    for (int c = 0; c < C; ++c) x(b, c) -= std::log(sum);
  }
  Scores t(B), log_t(B);
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c) t(b, c) = (b + c) % 4 == 0 ? 0.0 : 1.0 / 3.0;
  for (std::size_t i = 0; i < t.size(); ++i) log_t.data()[i] = std::log(t.data()[i] + 0.1);
  double kl = 0, kl_log = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t.data()[i] > 0) kl += t.data()[i] * std::log(t.data()[i] / std::exp(x.data()[i]));
    kl_log += std::exp(log_t.data()[i]) * (log_t.data()[i] - x.data()[i]);
  }
  const std::pair<loss::KLDivReduction, double> cases[] = {
      {loss::KLDivReduction::batchmean, B}, {loss::KLDivReduction::mean, B * C}, {loss::KLDivReduction::sum, 1}};
  for (const auto& [r, divisor] : cases) {
    CHECK(value_of(loss::KLDiv({.reduction = r}), x, etnn::const_view(t)) == doctest::Approx(kl / divisor).epsilon(1e-12));
    CHECK(value_of(loss::KLDiv({.reduction = r, .log_target = true}), x, etnn::const_view(log_t)) ==
          doctest::Approx(kl_log / divisor).epsilon(1e-12));
    check_gradient(loss::KLDiv({.reduction = r}), x, etnn::const_view(t));
    check_gradient(loss::KLDiv({.reduction = r, .log_target = true}), x, etnn::const_view(log_t));
  }
}

TEST_CASE("logits of +-1e4: CrossEntropy and BCEWithLogits in float stay finite and within 1e-6 of float64") {
  Tensor<float, Shape<3>> z(3);
  const float rows[3][3] = {{1e4f, -1e4f, 9997.0f}, {-1e4f, 1e4f, 0.0f}, {-1e4f, -1e4f, -9999.5f}};
  for (int b = 0; b < 3; ++b)
    for (int c = 0; c < 3; ++c) z(b, c) = rows[b][c];
  SUBCASE("CrossEntropy") {
    const std::vector<int> y{2, 0, 1};
    std::vector<float> grad(9);
    const float value = loss::CrossEntropy{}.value_and_grad(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(y), grad.data());
    double expected = 0;  // float64: -log softmax with the shift by the row maximum
    std::vector<double> expected_grad(9);
    for (int b = 0; b < 3; ++b) {
      double m = rows[b][0];
      for (float v : rows[b]) m = std::max(m, static_cast<double>(v));
      double sum = 0;
      for (float v : rows[b]) sum += std::exp(v - m);
      expected += (m - rows[b][y[static_cast<std::size_t>(b)]] + std::log(sum)) / 3;
      for (int c = 0; c < 3; ++c)
        expected_grad[static_cast<std::size_t>(b * 3 + c)] = (std::exp(rows[b][c] - m) / sum - (c == y[static_cast<std::size_t>(b)] ? 1 : 0)) / 3;
    }
    CHECK(std::isfinite(value));
    CHECK(std::abs(value - expected) <= 1e-6 * std::abs(expected));
    for (std::size_t i = 0; i < 9; ++i) CHECK(std::abs(grad[i] - expected_grad[i]) <= 1e-6);
  }
  SUBCASE("BCEWithLogits") {
    Tensor<float, Shape<3>> t(3);
    const float targets[9] = {0.3f, 1.0f, 0.0f, 0.7f, 0.0f, 1.0f, 0.5f, 1.0f, 0.25f};
    std::copy(targets, targets + 9, t.data());
    std::vector<float> grad(9);
    const float value = loss::BCEWithLogits{}.value_and_grad(etnn::Cpu{}, etnn::const_view(z), etnn::const_view(t), grad.data());
    double expected = 0;  // float64: max(z, 0) - z t + log1p(exp(-|z|)), gradient sigma(z) - t
    for (int i = 0; i < 9; ++i) {
      const double zi = z.data()[i], ti = targets[i];
      expected += (std::max(zi, 0.0) - zi * ti + std::log1p(std::exp(-std::abs(zi)))) / 9;
      CHECK(std::abs(grad[static_cast<std::size_t>(i)] - (sigmoid(zi) - ti) / 9) <= 1e-6);
    }
    CHECK(std::isfinite(value));
    CHECK(std::abs(value - expected) <= 1e-6 * std::abs(expected));
  }
}

TEST_CASE("CrossEntropy: logits of +-1000 in float, within 1e-6 of the exact value") {
  Tensor<float, Shape<3>> z(1);
  z(0, 0) = 1000.0f;
  z(0, 1) = -1000.0f;
  z(0, 2) = 990.0f;
  const std::vector<int> y{2};
  std::vector<float> grad(3);
  const float value = loss::CrossEntropy{}.value_and_grad(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(y), grad.data());
  CHECK(value == doctest::Approx(10 + std::log1p(std::exp(-10.0))).epsilon(1e-6));
  for (float g : grad) CHECK(std::isfinite(g));
}

TEST_CASE("label losses reject labels out of range, a label count that differs from the batch, wrong weight counts") {
  Tensor<float, Shape<3>> z(2);
  std::vector<float> grad(6);
  const std::vector<int> bad{0, 3};
  CHECK_THROWS_WITH_AS(loss::CrossEntropy{}.value_and_grad(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(bad), grad.data()),
                       doctest::Contains("label 3 of sample 1 is outside [0, 3)"), etnn::ShapeError);
  CHECK_THROWS_WITH_AS(loss::NLL{}.value(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(bad)),
                       doctest::Contains("etnn::loss::NLL: label 3 of sample 1"), etnn::ShapeError);
  const std::vector<int> short_labels{0};
  CHECK_THROWS_WITH_AS(loss::MultiMargin{}.value(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(short_labels)),
                       doctest::Contains("1 labels for a batch of 2"), etnn::ShapeError);
  const std::vector<int> good{0, 2};
  CHECK_THROWS_WITH_AS(loss::CrossEntropy({.weight = {1.0f, 2.0f}}).value(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(good)),
                       doctest::Contains("etnn::loss::CrossEntropy: 2 class weights for 3 classes"), etnn::ShapeError);
  CHECK_THROWS_WITH_AS(loss::NLL({.weight = {1.0f, 2.0f, 3.0f, 4.0f}}).value(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(good)),
                       doctest::Contains("4 class weights for 3 classes"), etnn::ShapeError);
}

TEST_CASE("tensor-target losses reject a target batch that differs from the output's") {
  Tensor<double, Shape<3>> y(2), t(3);
  CHECK_THROWS_WITH_AS(loss::L1{}.value(etnn::Cpu{}, etnn::const_view(y), etnn::const_view(t)),
                       doctest::Contains("etnn::loss::L1: 3 targets for a batch of 2"), etnn::ShapeError);
  Tensor<double, Shape<3>> p(3);
  std::fill(p.data(), p.data() + p.size(), 0.5);
  std::fill(t.data(), t.data() + t.size(), 0.5);
  p(1, 2) = 1.5;
  CHECK_THROWS_WITH_AS(loss::BCE{}.value(etnn::Cpu{}, etnn::const_view(p), etnn::const_view(t)),
                       doctest::Contains("input element 5 is 1.500000; BCE takes probabilities in [0, 1]"), etnn::Error);
}

TEST_CASE("options are validated at construction") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(loss::CrossEntropy({.label_smoothing = 1.5f}), doctest::Contains("label_smoothing must be in [0, 1], got 1.5"), etnn::Error);
  CHECK_THROWS_WITH_AS(loss::CrossEntropy({.label_smoothing = nan}), doctest::Contains("label_smoothing"), etnn::Error);
  CHECK_THROWS_WITH_AS(loss::CrossEntropy({.weight = {1.0f, -1.0f}}), doctest::Contains("weight[1] is -1.000000; class weights must be finite and >= 0"),
                       etnn::Error);
  CHECK_THROWS_WITH_AS(loss::NLL({.weight = {nan}}), doctest::Contains("etnn::loss::NLL: weight[0]"), etnn::Error);
  CHECK_THROWS_WITH_AS(loss::SmoothL1({.beta = -1.0f}), doctest::Contains("beta must be finite and >= 0"), etnn::Error);
  CHECK_THROWS_WITH_AS(loss::Huber({.delta = 0.0f}), doctest::Contains("delta must be finite and > 0"), etnn::Error);
  CHECK_THROWS_WITH_AS(loss::BCEWithLogits({.pos_weight = -2.0f}), doctest::Contains("pos_weight must be finite and >= 0"), etnn::Error);
  CHECK_THROWS_WITH_AS(loss::MultiMargin({.p = 3}), doctest::Contains("p must be 1 or 2, got 3"), etnn::Error);
  CHECK_THROWS_WITH_AS(loss::MultiMargin({.margin = nan}), doctest::Contains("margin must be finite"), etnn::Error);
  CHECK_NOTHROW(loss::CrossEntropy({.label_smoothing = 1.0f, .weight = {0.0f, 1.0f}}));
}

TEST_CASE("the Trainer checks Hinge's and MultiLabelSoftMargin's targets as it stages them: the loss's message, nothing updated") {
  namespace nn = etnn::nn;
  using Model = etnn::Model<decltype(nn::input<3> >> nn::linear<4>), double>;
  Model model(0);
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  Tensor<double, Shape<3>> x(2);
  etnn::test::fill_uniform(x.data(), x.size(), 13);
  // float targets for a double model: checked as the doubles the loss sees
  Tensor<float, Shape<4>> signs(2), hot(2);
  for (std::size_t i = 0; i < signs.size(); ++i) {
    signs.data()[i] = i % 3 == 0 ? -1.0f : 1.0f;
    hot.data()[i] = i % 2 == 0 ? 1.0f : 0.0f;
  }
  const std::vector<double> start(model.parameters(), model.parameters() + Model::flat_size);
  const auto unchanged = [&] { return std::equal(start.begin(), start.end(), model.parameters()); };
  loss::Hinge hinge;
  loss::MultiLabelSoftMargin multi_label;
  etnn::Trainer by_sign(model, hinge, opt);
  etnn::Trainer by_hot(model, multi_label, opt);
  signs.data()[6] = 0.5f;
  hot.data()[5] = -1.0f;
  CHECK_THROWS_WITH_AS(by_sign.step(x, signs), doctest::Contains("etnn::loss::Hinge: target element 6 is 0.500000; this loss takes targets of -1"),
                       etnn::Error);
  CHECK_THROWS_WITH_AS(by_hot.step(x, hot),
                       doctest::Contains("etnn::loss::MultiLabelSoftMargin: target element 5 is -1.000000; this loss takes targets of 0"),
                       etnn::Error);
  CHECK(unchanged());
  // A batch of targets that is not the input's is named as such, even with values outside the domain.
  Tensor<float, Shape<4>> three_rows(3);
  std::fill(three_rows.data(), three_rows.data() + three_rows.size(), 7.0f);
  CHECK_THROWS_WITH_AS(by_sign.step(x, three_rows), doctest::Contains("3 targets for a batch of 2"), etnn::ShapeError);
  CHECK(unchanged());
  signs.data()[6] = 1.0f;
  hot.data()[5] = 0.0f;
  CHECK(std::isfinite(static_cast<double>(by_sign.step(x, signs))));
  CHECK(std::isfinite(static_cast<double>(by_hot.step(x, hot))));
  CHECK_FALSE(unchanged());
  // double targets for a float model: 1 + 1e-12 is the float 1, a target Hinge takes.
  etnn::Model<decltype(nn::input<3> >> nn::linear<4>)> single(0);
  etnn::optim::SGD single_opt(single, {.lr = 0.1f});
  Tensor<float, Shape<3>> xf(2);
  etnn::test::fill_uniform(xf.data(), xf.size(), 13);
  Tensor<double, Shape<4>> near_signs(2);
  for (std::size_t i = 0; i < near_signs.size(); ++i) near_signs.data()[i] = i % 3 == 0 ? -1.0 : 1.0 + 1e-12;
  etnn::Trainer single_trainer(single, hinge, single_opt);
  CHECK(std::isfinite(static_cast<float>(single_trainer.step(xf, near_signs))));
}

TEST_CASE("the Trainer takes every loss: class indices, real values, multi-hot") {
  namespace nn = etnn::nn;
  etnn::Model<decltype(nn::input<3> >> nn::linear<4>)> model(0);
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  Tensor<float, Shape<3>> x(2);
  etnn::test::fill_uniform(x.data(), x.size(), 13);
  Tensor<float, Shape<4>> hot(2);
  for (std::size_t i = 0; i < hot.size(); ++i) hot.data()[i] = i % 2 == 0 ? 1.0f : 0.0f;
  const std::vector<int> y{1, 3};
  loss::MultiLabelSoftMargin multi_label;
  etnn::Trainer t1(model, multi_label, opt);
  const float before = t1.step(x, hot);
  for (int i = 0; i < 20; ++i) t1.step(x, hot);
  CHECK(t1.step(x, hot) < before);
  loss::NLL nll;  // on raw scores: any finite loss, here only the staging is under test
  etnn::Trainer t2(model, nll, opt);
  CHECK(std::isfinite(t2.step(x, y)));
  loss::Huber huber({.delta = 0.5f});
  etnn::Trainer t3(model, huber, opt);
  CHECK(std::isfinite(t3.step(x, hot)));
}
