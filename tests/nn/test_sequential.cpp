// The network DSL: composition, compile-time shapes and counts, fusion, names, initialisation,
// and the forward pass against a naive reference.
#include <doctest/doctest.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "support/gradcheck.hpp"

namespace nn = etnn::nn;

namespace {
constexpr auto mlp = nn::input<784> >> nn::linear<512> >> nn::relu >> nn::linear<10>;
using Mlp = std::remove_const_t<decltype(mlp)>;
static_assert(std::is_same_v<Mlp, nn::Sequential<nn::Input<784>, nn::Linear<512>, nn::ReLU, nn::Linear<10>>>);
static_assert(Mlp::num_params == 784 * 512 + 512 + 512 * 10 + 10);
static_assert(std::is_same_v<Mlp::output_shape, etnn::Shape<10>>);
static_assert(std::is_same_v<Mlp::input_shape, etnn::Shape<784>>);

// Fusion: linear >> relu is one layer; the last linear keeps an identity epilogue.
using MlpLayers = Mlp::layers;
static_assert(MlpLayers::size == 2);
static_assert(std::is_same_v<MlpLayers, etnn::TypeList<nn::DenseLayer<etnn::Shape<784>, 512, etnn::fn::Relu, 0>,
                                                       nn::DenseLayer<etnn::Shape<512>, 10, etnn::fn::Identity, 2>>>);

using Image = decltype(nn::input<1, 28, 28> >> nn::flatten >> nn::linear<32> >> nn::tanh >> nn::tanh >> nn::linear<10>);
static_assert(std::is_same_v<Image::output_shape, etnn::Shape<10>>);
static_assert(Image::layers::size == 4);  // flatten, linear+tanh, tanh, linear
static_assert(etnn::Shape<1, 28, 28>::size == 784 && etnn::Shape<1, 28, 28>::rank == 3);
}  // namespace

TEST_CASE("describe() spells the network as it was written") {
  CHECK(Mlp::describe() == "input<784> >> linear<512> >> relu >> linear<10>");
  CHECK(Image::describe() == "input<1,28,28> >> flatten >> linear<32> >> tanh >> tanh >> linear<10>");
}

TEST_CASE("parameters are named as torch.nn.Sequential.state_dict() names them") {
  const auto params = etnn::Model<Mlp>::named_parameters();
  REQUIRE(params.size() == 4);
  CHECK(params[0].name == "0.weight");
  CHECK(params[0].shape == std::vector<int>{512, 784});
  CHECK(params[1].name == "0.bias");
  CHECK(params[1].offset == 512 * 784);
  CHECK(params[2].name == "2.weight");
  CHECK(params[2].shape == std::vector<int>{10, 512});
  CHECK(params[3].name == "2.bias");
  // Every tensor starts on a 256-byte boundary (64 floats), with zeros between: 10 biases then 54.
  CHECK(params[2].offset == 512 * 784 + 512);
  CHECK(params[3].offset == 512 * 784 + 512 + 5120);
  CHECK(params[3].offset + 64 == Mlp::flat_size);

  const auto image = etnn::Model<Image>::named_parameters();
  CHECK(image[0].name == "1.weight");  // flatten is module 0
  CHECK(image[2].name == "4.weight");  // flatten 0, linear 1, tanh 2, tanh 3, linear 4
}

TEST_CASE("initialisation follows PyTorch's bounds and depends only on the seed") {
  etnn::Model<Mlp> a(42), b(42), c(43);
  const float* pa = a.parameters();
  CHECK(std::equal(pa, pa + Mlp::flat_size, b.parameters()));
  CHECK(!std::equal(pa, pa + Mlp::flat_size, c.parameters()));
  // U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the sample fills that interval.
  const float bound0 = 1.0f / std::sqrt(784.0f);
  const auto [lo, hi] = std::minmax_element(pa, pa + 784 * 512);
  CHECK(*lo >= -bound0);
  CHECK(*hi <= bound0);
  CHECK(*lo < -0.99f * bound0);
  CHECK(*hi > 0.99f * bound0);
  double mean = 0;
  for (int i = 0; i < 784 * 512; ++i) mean += pa[i];
  CHECK(std::abs(mean / (784 * 512)) < 1e-3 * bound0 * 30);
  const float bound2 = 1.0f / std::sqrt(512.0f);
  for (std::size_t i = 784 * 512 + 512; i < Mlp::flat_size; ++i) CHECK(std::abs(pa[i]) <= bound2);
  for (std::size_t i = 0; i < Mlp::flat_size; ++i) REQUIRE(a.gradients()[i] == 0.0f);
}

namespace {
// y = W x + b, then f, written as plainly as possible.
template <class F>
std::vector<double> naive_dense(const double* w, const double* b, const std::vector<double>& x, int in, int out, F f) {
  std::vector<double> y(static_cast<std::size_t>(out));
  for (int o = 0; o < out; ++o) {
    double s = b[o];
    for (int i = 0; i < in; ++i) s += w[o * in + i] * x[static_cast<std::size_t>(i)];
    y[static_cast<std::size_t>(o)] = f(s);
  }
  return y;
}
}  // namespace

TEST_CASE("forward matches a naive reference, every activation, several batch sizes") {
  using Net = decltype(nn::input<2, 3> >> nn::flatten >> nn::linear<9> >> nn::gelu >> nn::linear<8> >> nn::silu >>
                       nn::linear<7> >> nn::leaky_relu >> nn::linear<6> >> nn::sigmoid >> nn::tanh >> nn::linear<5> >>
                       nn::relu);
  etnn::Model<Net, double> model(5);
  const double* p = model.parameters();
  for (int batch : {1, 2, 17}) {
    etnn::Tensor<double, etnn::Shape<2, 3>> x(batch);
    etnn::test::fill_uniform(x.data(), x.size(), 9, 3.0);
    const auto y = model.forward(x);
    REQUIRE(y.batch() == batch);
    for (int s = 0; s < batch; ++s) {
      std::vector<double> h(x.data() + s * 6, x.data() + s * 6 + 6);
      std::size_t at = 0;
      auto layer = [&](int in, int out, auto f) {  // weight and bias each from a multiple of 64
        const std::size_t bias = etnn::aligned_values(static_cast<std::size_t>(in * out));
        h = naive_dense(p + at, p + at + bias, h, in, out, f);
        at += bias + etnn::aligned_values(static_cast<std::size_t>(out));
      };
      layer(6, 9, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); });
      layer(9, 8, [](double v) { return v / (1 + std::exp(-v)); });
      layer(8, 7, [](double v) { return v > 0 ? v : 0.01 * v; });
      layer(7, 6, [](double v) { return std::tanh(1 / (1 + std::exp(-v))); });
      layer(6, 5, [](double v) { return v > 0 ? v : 0.0; });
      for (int j = 0; j < 5; ++j) CHECK(y(s, j) == doctest::Approx(h[static_cast<std::size_t>(j)]).epsilon(1e-12));
    }
  }
}

TEST_CASE("forward into a caller's tensor equals the allocating forward") {
  etnn::Model<Mlp> model(1);
  etnn::Tensor<float, etnn::Shape<784>> x(8);
  etnn::test::fill_uniform(x.data(), x.size(), 3);
  const auto expected = model.forward(x);
  etnn::Tensor<float, etnn::Shape<10>> out(8);
  model.forward(x.view(), out.view());
  CHECK(std::equal(out.data(), out.data() + out.size(), expected.data()));
  etnn::Tensor<float, etnn::Shape<10>> wrong(7);
  CHECK_THROWS_AS(model.forward(x, wrong.view()), etnn::ShapeError);
}
