// core/lane_sum.hpp: lane_sum's order is the documented one (8 interleaved partials, the tail on
// the first ones, then added in lane order), bit for bit, at lengths around the group size.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include <etnn/etnn.hpp>

namespace {
// Terms whose float sum depends on the order: magnitudes over 8 decades, mixed signs.
float term(int j) { return (j % 3 == 0 ? -1.0f : 1.0f) * std::pow(10.0f, static_cast<float>(j % 9) - 4.0f) * (1.0f + j / 7.0f); }

template <int N>
void check_order() {
  float part[8] = {};
  for (int j = 0; j < N / 8 * 8; ++j) part[j % 8] += term(j);
  for (int j = N / 8 * 8; j < N; ++j) part[j - N / 8 * 8] += term(j);
  float expected = part[0];
  for (int l = 1; l < 8; ++l) expected += part[l];
  double exact = 0;
  for (int j = 0; j < N; ++j) exact += term(j);
  const float sum = etnn::detail::lane_sum<N, float>(term);
  CAPTURE(N);
  CHECK(sum == expected);
  CHECK(std::abs(sum - exact) <= 1e-6 * (1 + std::abs(exact)));
  CHECK(etnn::detail::lane_sum<N, double>([](int j) { return double(term(j)); }) == doctest::Approx(exact).epsilon(1e-12));
}
}  // namespace

TEST_CASE("lane_sum: 8 interleaved partials, the tail on the first ones, added in lane order") {
  check_order<1>();
  check_order<7>();
  check_order<8>();
  check_order<9>();
  check_order<37>();
  check_order<128>();
  check_order<784>();
}
