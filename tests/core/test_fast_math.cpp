// core/fast_math.hpp: fast_exp against std::exp over the float range, and at its edges.
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
