// core/fast_math.hpp: fast_exp and fast_erf against the double-precision library functions over
// the float range, and at their edges.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include <etnn/etnn.hpp>

TEST_CASE("fast_exp: within 2e-7 of std::exp for float, std::exp itself for double") {
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.00731f) {
    const double e = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(etnn::detail::fast_exp(x) - e) / e);
  }
  CHECK(worst < 2e-7);
  CHECK(etnn::detail::fast_exp(0.0f) == 1.0f);
  CHECK(etnn::detail::fast_exp(-std::numeric_limits<float>::infinity()) < 1e-37f);
  CHECK(std::isnan(etnn::detail::fast_exp(std::numeric_limits<float>::quiet_NaN())));
  CHECK(etnn::detail::fast_exp(0.3) == std::exp(0.3));
}

TEST_CASE("fast_erf: within 4e-7 of erf for float, relative near 0 and odd; std::erf itself for double") {
  double worst = 0, worst_small = 0;
  for (float x = -6.0f; x < 6.0f; x += 1.0f / 4096) {
    const double e = std::erf(static_cast<double>(x));
    worst = std::max(worst, std::abs(etnn::detail::fast_erf(x) - e));
    if (std::abs(x) < 0.5f && x != 0.0f) worst_small = std::max(worst_small, std::abs(etnn::detail::fast_erf(x) - e) / std::abs(e));
    CHECK(etnn::detail::fast_erf(-x) == -etnn::detail::fast_erf(x));
  }
  CHECK(worst < 4e-7);
  CHECK(worst_small < 4e-7);
  CHECK(etnn::detail::fast_erf(0.0f) == 0.0f);
  CHECK(etnn::detail::fast_erf(1e-30f) > 0.0f);
  CHECK(etnn::detail::fast_erf(std::numeric_limits<float>::infinity()) == doctest::Approx(1.0f).epsilon(1e-7));
  CHECK(etnn::detail::fast_erf(-std::numeric_limits<float>::infinity()) == doctest::Approx(-1.0f).epsilon(1e-7));
  CHECK(std::isnan(etnn::detail::fast_erf(std::numeric_limits<float>::quiet_NaN())));
  CHECK(etnn::detail::fast_erf(0.3) == std::erf(0.3));
}
