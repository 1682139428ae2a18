// Elementwise expressions evaluate in one pass to what naive loops compute.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include <etnn/etnn.hpp>

using namespace etnn::expr;

TEST_CASE("arithmetic, scalars and functors fuse into one loop") {
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{100000}}) {  // below and above the threading threshold
    std::vector<double> a(n), b(n), out(n);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = std::sin(static_cast<double>(i));
      b[i] = std::cos(static_cast<double>(i)) + 2;
    }
    const auto e = (ref(a.data(), n) * 2.0 + ref(b.data(), n)) / ref(b.data(), n) - apply<etnn::fn::Tanh>(ref(a.data(), n));
    etnn::assign(etnn::Cpu{}, out.data(), e);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(out[i] == doctest::Approx((a[i] * 2 + b[i]) / b[i] - std::tanh(a[i])));
    etnn::assign(etnn::Cpu{}, out.data(), -ref(a.data(), n) + 1.0);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(out[i] == 1 - a[i]);
  }
}

TEST_CASE("derivative nodes and in-place evaluation") {
  const std::size_t n = 50;
  std::vector<float> x(n), y(n), dy(n, 2.0f);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i) / 10 - 2.5f;
  etnn::assign(etnn::Cpu{}, y.data(), apply<etnn::fn::Sigmoid>(ref(x.data(), n)));
  etnn::assign(etnn::Cpu{}, dy.data(), ref(dy.data(), n) * derivative<etnn::fn::Sigmoid>(ref(x.data(), n), ref(y.data(), n)));
  for (std::size_t i = 0; i < n; ++i) REQUIRE(dy[i] == doctest::Approx(2 * y[i] * (1 - y[i])));
}

TEST_CASE("operands of different lengths are rejected") {
  std::vector<float> a(3), b(4);
  CHECK_THROWS_AS(ref(a.data(), 3) + ref(b.data(), 4), etnn::ShapeError);
}

TEST_CASE("fill and for_each_index") {
  std::vector<int> v(70000, 1);
  etnn::fill(etnn::Cpu{}, v.data(), v.size(), 5);
  for (int x : v) REQUIRE(x == 5);
  etnn::for_each_index(etnn::Cpu{}, v.size(), [&](std::size_t i) { v[i] = static_cast<int>(i); });
  for (std::size_t i = 0; i < v.size(); ++i) REQUIRE(v[i] == static_cast<int>(i));
}
