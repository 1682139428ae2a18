#include <doctest/doctest.h>

#include <etnn/etnn.hpp>

static_assert(etnn::Shape<784>::size == 784 && etnn::Shape<784>::rank == 1);
static_assert(etnn::Shape<3, 4, 5>::size == 60 && etnn::Shape<3, 4, 5>::dims[2] == 5);
static_assert(std::is_same_v<etnn::Flat<etnn::Shape<1, 28, 28>>, etnn::Shape<784>>);
static_assert(etnn::ShapeType<etnn::Shape<2>> && !etnn::ShapeType<int>);

TEST_CASE("Shape prints like PyTorch's size") {
  CHECK(etnn::Shape<1, 28, 28>::to_string() == "(1, 28, 28)");
  CHECK(etnn::Shape<10>::to_string() == "(10)");
}

TEST_CASE("random numbers are reproducible and unbiased") {
  etnn::Rng a(7), b(7), c(8);
  for (int i = 0; i < 100; ++i) REQUIRE(a.next() == b.next());
  CHECK(a.next() != c.next());
  etnn::Rng r(1);
  int counts[3] = {0, 0, 0};
  double sum = 0;
  for (int i = 0; i < 30000; ++i) {
    ++counts[r.below(3)];
    const double u = r.uniform();
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    sum += u;
  }
  for (int c3 : counts) CHECK(std::abs(c3 - 10000) < 400);
  CHECK(sum / 30000 == doctest::Approx(0.5).epsilon(0.01));
  CHECK(etnn::derive_seed(1, 2) != etnn::derive_seed(1, 3));
}

TEST_CASE("a build without CUDA picks the CPU and refuses CUDA clearly") {
  CHECK(etnn::best_device() == etnn::DeviceKind::cpu);
  int ran_on_cpu = 0;
  etnn::dispatch(etnn::best_device(), [&]<class Device>(Device) { ran_on_cpu = std::is_same_v<Device, etnn::Cpu>; });
  CHECK(ran_on_cpu == 1);
  CHECK_THROWS_WITH_AS(etnn::dispatch(etnn::DeviceKind::cuda, [](auto) {}),
                       doctest::Contains("built without CUDA"), etnn::UnavailableError);
}
