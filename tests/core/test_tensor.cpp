#include <doctest/doctest.h>

#include <etnn/etnn.hpp>

TEST_CASE("Tensor indexing is row-major with the batch outermost") {
  etnn::Tensor<float, etnn::Shape<2, 3>> t(4);
  CHECK(t.size() == 24);
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<float>(i);
  CHECK(t(0, 0, 0) == 0.0f);
  CHECK(t(1, 0, 2) == 8.0f);
  CHECK(t(3, 1, 1) == 22.0f);
  const auto v = t.view();
  CHECK(v.sample(2) == t.data() + 12);
  CHECK(v.first(2).batch() == 2);
  CHECK_THROWS_AS(v.first(5), etnn::ShapeError);
  etnn::TensorView<const float, etnn::Shape<2, 3>> cv = t.view();
  CHECK(cv(3, 1, 1) == 22.0f);
}

TEST_CASE("Tensor::resize reuses capacity and Buffer is aligned and movable") {
  etnn::Tensor<double, etnn::Shape<5>> t(8);
  const double* before = t.data();
  t.resize(3);
  CHECK(t.data() == before);
  CHECK(t.capacity() == 8);
  t.resize(9);
  CHECK(t.capacity() == 9);
  CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % etnn::Cpu::alignment == 0);
  etnn::Buffer<float, etnn::Cpu> a(10);
  float* p = a.data();
  etnn::Buffer<float, etnn::Cpu> b(std::move(a));
  CHECK(b.data() == p);
  CHECK(a.data() == nullptr);
  using Pair = etnn::Tensor<float, etnn::Shape<2>>;
  CHECK_THROWS_AS(Pair(-1), etnn::ShapeError);
}
