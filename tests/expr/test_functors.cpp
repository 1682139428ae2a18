// Each activation: value against the closed form, derivative against central differences in
// double precision, and the (x, y) -> f' contract (y-only derivatives ignore x).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

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

// fn::chain(f, g, x, y) = g f'(x, y), through ReLU's select: equal to the product wherever g is
// finite, and PyTorch's threshold_backward (grad where y > 0, else 0) where it is not.
template <class F>
void check_chain_is_the_product(F f) {
  for (double x = -3.0; x <= 3.0; x += 0.25) {
    const double y = f(x);
    for (const double g : {-1.5, 0.0, 2.25}) CHECK(etnn::fn::chain(f, g, x, y) == g * f.derivative(x, y));
  }
}

TEST_CASE("the chain rule step g f'(x, y), and ReLU's for a non-finite g") {
  check_chain_is_the_product(etnn::fn::Relu{});
  check_chain_is_the_product(etnn::fn::LeakyRelu<>{});
  check_chain_is_the_product(etnn::fn::Tanh{});
  check_chain_is_the_product(etnn::fn::Gelu{});
  const etnn::fn::Relu relu;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  CHECK(relu.chain(nan, -1.0f, 0.0f) == 0.0f);  // the unit is off: no gradient passes, NaN or not
  CHECK(relu.chain(inf, -1.0f, 0.0f) == 0.0f);
  CHECK(std::isnan(relu.chain(nan, 2.0f, 2.0f)));  // on: the gradient passes as it is
  CHECK(relu.chain(-inf, 2.0f, 2.0f) == -inf);
  // A NaN unit passes nothing back (NaN > 0 is false; PyTorch passes g, but its NaN reaches the
  // loss either way, where the guard sees it).
  CHECK(relu.chain(5.0f, nan, nan) == 0.0f);
}

namespace {
float gelu_value(float x) { return etnn::fn::Gelu{}(x); }
float gelu_derivative(float x) { return etnn::fn::Gelu{}.derivative(x, 0.0f); }
}  // namespace

TEST_CASE("float gelu: near the double formula, and the same bits in a vectorised loop as one call at a time") {
  // A loop's vector body and its scalar remainder must agree bit for bit: how threads split a
  // layer's loop decides which elements fall in the remainder (see core/fast_math's fmadd).
  std::vector<float> x(4099), value(x.size()), derivative(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = -7.0f + 14.0f * static_cast<float>(i) / 4098.0f;
  ETNN_SIMD
  for (std::size_t i = 0; i < x.size(); ++i) {
    value[i] = etnn::fn::Gelu{}(x[i]);
    derivative[i] = etnn::fn::Gelu{}.derivative(x[i], 0.0f);
  }
  float (*volatile one_value)(float) = gelu_value;  // called through a pointer: never inlined into a vector loop
  float (*volatile one_derivative)(float) = gelu_derivative;
  int differing = 0;
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    differing += std::bit_cast<std::uint32_t>(value[i]) != std::bit_cast<std::uint32_t>(one_value(x[i]));
    differing += std::bit_cast<std::uint32_t>(derivative[i]) != std::bit_cast<std::uint32_t>(one_derivative(x[i]));
    worst = std::max(worst, std::abs(value[i] - etnn::fn::Gelu{}(static_cast<double>(x[i]))));
    worst = std::max(worst, std::abs(derivative[i] - etnn::fn::Gelu{}.derivative(static_cast<double>(x[i]), 0.0)));
  }
  CHECK(differing == 0);
  CHECK(worst < 2e-6);
}

namespace {
template <class T>
bool same_bits(T a, T b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof(T)) == 0;
}

// A fused layer's steps through f (fn::activate in forward, fn::chain_kept in backward) against
// f, f' and fn::chain called apart: the same bits, on awkward values too, one call at a time and
// in a vectorised loop (where the activation's value_and_derivative shares its terms).
template <class T, class F>
void check_kept_derivative(F f) {
  const std::string name = F::name;
  CAPTURE(name);
  const T inf = std::numeric_limits<T>::infinity();
  std::vector<T> z = {T(0), -T(0), T(1), T(-1), T(0.3), T(-2.5), T(7), T(-9), T(40), T(-40), T(1e-30), inf, -inf,
                      std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::denorm_min()};
  for (int i = 0; i < 2000; ++i) z.push_back(T(-8) + T(16) * T(i) / T(1999));
  const std::size_t n = z.size();
  std::vector<T> y(n), kept(n, T(0)), dz(n);
  ETNN_SIMD
  for (std::size_t i = 0; i < n; ++i) y[i] = etnn::fn::activate(f, z[i], kept.data() + i);
  ETNN_SIMD
  for (std::size_t i = 0; i < n; ++i) dz[i] = etnn::fn::chain_kept(f, T(0.75) - T(i % 3), y.data(), kept.data(), i);
  int differing = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const T value = f(z[i]);
    differing += !same_bits(y[i], value);
    if constexpr (F::derivative_needs_input) differing += !same_bits(kept[i], f.derivative(z[i], value));
    differing += !same_bits(dz[i], etnn::fn::chain(f, T(0.75) - T(i % 3), z[i], value));
  }
  CHECK(differing == 0);
}

template <class T>
void check_kept_derivatives() {
  check_kept_derivative<T>(etnn::fn::Identity{});
  check_kept_derivative<T>(etnn::fn::Relu{});
  check_kept_derivative<T>(etnn::fn::LeakyRelu<>{});
  check_kept_derivative<T>(etnn::fn::Tanh{});
  check_kept_derivative<T>(etnn::fn::Sigmoid{});
  check_kept_derivative<T>(etnn::fn::Gelu{});
  check_kept_derivative<T>(etnn::fn::Silu{});
}
}  // namespace

TEST_CASE("a fused layer keeps f'(z) in forward: the same bits as f, f' and the chain step apart") {
  check_kept_derivatives<float>();
  check_kept_derivatives<double>();
}
