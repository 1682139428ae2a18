// Each activation: value against the closed form, derivative against central differences in
// double precision, and the (x, y) -> f' contract (y-only derivatives ignore x).
#include <doctest/doctest.h>

#include <cmath>

#include <etnn/etnn.hpp>

namespace {
template <class F>
void check_derivative(F f) {
  double worst = 0;
  for (double x = -6.0; x <= 6.0; x += 0.173) {
    const double h = 1e-6;
    const double numeric = (f(x + h) - f(x - h)) / (2 * h);
    const double y = f(x);
    const double analytic = f.derivative(F::derivative_needs_input ? x : std::nan(""), y);
    worst = std::max(worst, std::abs(analytic - numeric) / std::max(1.0, std::abs(numeric)));
    REQUIRE(std::abs(analytic - numeric) <= 1e-5 + 1e-3 * std::abs(numeric));
  }
  MESSAGE(std::string(F::name), " derivative max relative error ", worst);
}
}  // namespace

TEST_CASE("activation values") {
  CHECK(etnn::fn::Relu{}(-2.0) == 0.0);
  CHECK(etnn::fn::Relu{}(3.0) == 3.0);
  CHECK(etnn::fn::LeakyRelu<>{}(-2.0) == doctest::Approx(-0.02));
  CHECK(etnn::fn::Sigmoid{}(0.0) == 0.5);
  CHECK(etnn::fn::Sigmoid{}(-800.0) == 0.0);  // no overflow
  CHECK(etnn::fn::Sigmoid{}(800.0) == 1.0);
  CHECK(etnn::fn::Gelu{}(1.0) == doctest::Approx(0.8413447460685429));  // torch.nn.functional.gelu(1.)
  CHECK(etnn::fn::Silu{}(1.0) == doctest::Approx(0.7310585786300049));
  CHECK(etnn::fn::Tanh{}(0.5) == doctest::Approx(std::tanh(0.5)));
}

TEST_CASE("activation derivatives against finite differences") {
  check_derivative(etnn::fn::Relu{});
  check_derivative(etnn::fn::LeakyRelu<>{});
  check_derivative(etnn::fn::LeakyRelu<std::ratio<1, 5>>{});
  check_derivative(etnn::fn::Tanh{});
  check_derivative(etnn::fn::Sigmoid{});
  check_derivative(etnn::fn::Gelu{});
  check_derivative(etnn::fn::Silu{});
}

TEST_CASE("relu keeps a NaN, as torch.relu does") {
  CHECK(std::isnan(etnn::fn::Relu{}(std::nan(""))));
  CHECK(std::isnan(etnn::fn::Relu{}(std::nanf(""))));
  CHECK(etnn::fn::Relu{}(-2.0f) == 0.0f);
  CHECK(etnn::fn::Relu{}(3.0) == 3.0);
}
