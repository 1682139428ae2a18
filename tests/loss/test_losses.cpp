// Losses: value against a naive formula, gradient against central differences (double),
// numerical stability and target validation.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "support/gradcheck.hpp"

using etnn::Shape;
using etnn::Tensor;

namespace {
double naive_cross_entropy(const Tensor<double, Shape<4>>& z, const std::vector<int>& y) {
  double total = 0;
  for (int b = 0; b < z.batch(); ++b) {
    double sum = 0;
    for (int j = 0; j < 4; ++j) sum += std::exp(z(b, j));
    total += std::log(sum) - z(b, y[static_cast<std::size_t>(b)]);
  }
  return total / z.batch();
}

// Central differences of loss(z) with respect to every element of z.
template <class F>
void check_gradient(Tensor<double, Shape<4>>& z, const std::vector<double>& grad, F loss) {
  for (std::size_t i = 0; i < z.size(); ++i) {
    const double saved = z.data()[i];
    z.data()[i] = saved + 1e-6;
    const double up = loss();
    z.data()[i] = saved - 1e-6;
    const double down = loss();
    z.data()[i] = saved;
    const double numeric = (up - down) / 2e-6;
    REQUIRE(std::abs(grad[i] - numeric) <= 1e-5 + 1e-3 * std::abs(numeric));
  }
}
}  // namespace

TEST_CASE("cross-entropy: value, gradient, one pass") {
  Tensor<double, Shape<4>> z(3);
  etnn::test::fill_uniform(z.data(), z.size(), 4, 3.0);
  const std::vector<int> y{3, 0, 2};
  etnn::loss::CrossEntropy ce;
  std::vector<double> grad(z.size());
  const double value = ce.value_and_grad(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(y), grad.data());
  CHECK(value == doctest::Approx(naive_cross_entropy(z, y)).epsilon(1e-12));
  CHECK(ce.value(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(y)) == value);
  check_gradient(z, grad, [&] { return naive_cross_entropy(z, y); });
  // Each row's gradient sums to zero: softmax sums to one.
  for (int b = 0; b < 3; ++b) CHECK(std::abs(grad[b * 4] + grad[b * 4 + 1] + grad[b * 4 + 2] + grad[b * 4 + 3]) < 1e-15);
}

TEST_CASE("cross-entropy is stable for huge logits") {
  Tensor<float, Shape<3>> z(1);
  z(0, 0) = 1000.0f;
  z(0, 1) = -1000.0f;
  z(0, 2) = 990.0f;
  const std::vector<int> y{2};
  std::vector<float> grad(3);
  const float value = etnn::loss::CrossEntropy{}.value_and_grad(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(y), grad.data());
  CHECK(std::isfinite(value));
  CHECK(value == doctest::Approx(10.0f).epsilon(1e-4));
  for (float g : grad) CHECK(std::isfinite(g));
}

TEST_CASE("cross-entropy rejects labels out of range and a label count that differs from the batch") {
  Tensor<float, Shape<3>> z(2);
  std::vector<float> grad(6);
  const std::vector<int> bad{0, 3};
  CHECK_THROWS_WITH_AS(etnn::loss::CrossEntropy{}.value_and_grad(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(bad), grad.data()),
                       doctest::Contains("label 3 of sample 1 is outside [0, 3)"), etnn::ShapeError);
  const std::vector<int> short_labels{0};
  CHECK_THROWS_WITH_AS(etnn::loss::CrossEntropy{}.value(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(short_labels)),
                       doctest::Contains("1 labels for a batch of 2"), etnn::ShapeError);
}

TEST_CASE("MSE: value and gradient") {
  Tensor<double, Shape<4>> out(2), target(2);
  etnn::test::fill_uniform(out.data(), out.size(), 1);
  etnn::test::fill_uniform(target.data(), target.size(), 2);
  auto naive = [&] {
    double s = 0;
    for (std::size_t i = 0; i < out.size(); ++i) s += (out.data()[i] - target.data()[i]) * (out.data()[i] - target.data()[i]);
    return s / static_cast<double>(out.size());
  };
  std::vector<double> grad(out.size());
  etnn::loss::MSE mse;
  CHECK(mse.value_and_grad(etnn::Cpu{}, etnn::const_view(out), etnn::const_view(target), grad.data()) == doctest::Approx(naive()).epsilon(1e-14));
  check_gradient(out, grad, naive);
}
