// The padding that lets the fully fused bf16 kernels take any MLP with widths up to 128
// (expr/fused_mlp_padding.hpp), checked on the CPU: the index maps are each other's inverse, and the
// padded network, with its parameters and input laid out by them, computes the true network's
// outputs and gradients (double precision), with zeros in every padded place, for each activation
// the fused chain takes (ReLU, tanh, SiLU). And the fused chain's ReLU step (fn::activate,
// fn::chain_kept: what the kernels call) is the CPU's ReLU on every value the non-finite guard
// cares about: NaN, +-0, +-inf, denormals, negatives.
#include <doctest/doctest.h>

#include <etnn/etnn.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "support/gradcheck.hpp"

namespace nn = etnn::nn;
using etnn::expr::detail::fused_hidden;
using etnn::expr::detail::fused_width;
using etnn::expr::detail::PaddedMlp;

TEST_CASE("fused widths: the next of 16, 32, 64, 128; none above 128") {
  CHECK(fused_width(1) == 16);
  CHECK(fused_width(16) == 16);
  CHECK(fused_width(17) == 32);
  CHECK(fused_width(33) == 64);
  CHECK(fused_width(100) == 128);
  CHECK(fused_width(128) == 128);
  CHECK(fused_width(129) == 0);
  static_assert(PaddedMlp<20, 64, 10>::fits && PaddedMlp<20, 64, 10>::needed);
  static_assert(PaddedMlp<64, 64, 16>::fits && !PaddedMlp<64, 64, 16>::needed);
  static_assert(!PaddedMlp<784, 64, 10>::fits);
  static_assert(!PaddedMlp<64, 129, 10>::fits);
  // Flat lengths: each weight and bias from a multiple of 64 values, as etnn's linear layers lay them out.
  using etnn::aligned_values;
  static_assert(PaddedMlp<20, 64, 10>::num_params ==
                aligned_values(64 * 20) + aligned_values(64) + aligned_values(10 * 64) + aligned_values(10));
  static_assert(PaddedMlp<20, 64, 10>::padded_params == 64 * 32 + 64 + 16 * 64 + 64);
}

TEST_CASE("the fused kernels' parameter layout is the linear layers' own") {
  using Net = decltype(nn::input<20> >> nn::linear<40> >> nn::relu >> nn::linear<128> >> nn::relu >> nn::linear<3>);
  using Layout = etnn::expr::detail::MlpLayout<20, 40, 128, 3>;
  const auto params = etnn::Model<Net>::named_parameters();
  REQUIRE(params.size() == 6);
  for (int l = 0; l < 3; ++l) {
    CHECK(params[static_cast<std::size_t>(2 * l)].offset == Layout::weight_at(l));
    CHECK(params[static_cast<std::size_t>(2 * l + 1)].offset == Layout::bias_at(l));
  }
  CHECK(Layout::size == Net::flat_size);
  CHECK(Layout::place(Layout::bias_at(0) + 39).layer == 0);  // the last bias of layer 0
  CHECK(Layout::place(Layout::bias_at(0) + 40).layer == -1);  // past it: zeros before layer 1
}

TEST_CASE("the parameter maps are each other's inverse, and padding is everything else") {
  using Padding = PaddedMlp<20, 40, 128, 3>;
  using Net = decltype(nn::input<20> >> nn::linear<40> >> nn::relu >> nn::linear<128> >> nn::relu >> nn::linear<3>);
  std::vector<int> hits(Padding::padded_params, 0);
  std::size_t parameters = 0;
  for (std::size_t i = 0; i < Padding::num_params; ++i) {
    const std::size_t j = Padding::padded_index(i);
    if (j == Padding::padded_params) continue;  // between tensors
    REQUIRE(j < Padding::padded_params);
    CHECK(Padding::true_index(j) == i);
    ++hits[j];
    ++parameters;
  }
  CHECK(parameters == Net::num_params);
  std::size_t padding = 0;
  for (std::size_t j = 0; j < Padding::padded_params; ++j) {
    CHECK(hits[j] <= 1);
    if (hits[j] == 0) {
      CHECK(Padding::true_index(j) == Padding::num_params);
      ++padding;
    }
  }
  CHECK(padding == Padding::padded_params - Net::num_params);
}

TEST_CASE("column copies pad with zeros and drop columns") {
  const std::vector<float> m = {1, 2, 3, 4, 5, 6};  // (2, 3)
  std::vector<float> padded(2 * 5), back(2 * 3);
  for (std::size_t k = 0; k < padded.size(); ++k) padded[k] = etnn::expr::detail::column_copy_element(m.data(), 3, 5, k);
  CHECK(padded == std::vector<float>{1, 2, 3, 0, 0, 4, 5, 6, 0, 0});
  for (std::size_t k = 0; k < back.size(); ++k) back[k] = etnn::expr::detail::column_copy_element(padded.data(), 5, 3, k);
  CHECK(back == m);
}

TEST_CASE_TEMPLATE("a padded MLP computes the true one's outputs and parameter gradients, zeros elsewhere", Act,
                   nn::ReLU, nn::Tanh, nn::SiLU) {
  constexpr Act f{};
  using Net = decltype(nn::input<20> >> nn::linear<40> >> f >> nn::linear<48> >> f >> nn::linear<3>);
  using Padded = decltype(nn::input<32> >> nn::linear<64> >> f >> nn::linear<64> >> f >> nn::linear<16>);
  using Padding = PaddedMlp<20, 40, 48, 3>;
  static_assert(Padding::num_params == Net::flat_size && Padding::padded_params == Padded::flat_size);
  const int batch = 7;
  etnn::Model<Net, double> model(3);
  etnn::Model<Padded, double> padded(99);
  for (std::size_t j = 0; j < Padding::padded_params; ++j) {
    const std::size_t i = Padding::true_index(j);
    padded.parameters()[j] = i < Padding::num_params ? model.parameters()[i] : 0.0;
  }
  etnn::Tensor<double, etnn::Shape<20>> x(batch);
  etnn::test::fill_uniform(x.data(), x.size(), 5, 2.0);
  etnn::Tensor<double, etnn::Shape<32>> padded_x(batch);
  for (std::size_t k = 0; k < padded_x.size(); ++k)
    padded_x.data()[k] = etnn::expr::detail::column_copy_element(x.data(), 20, 32, k);

  // Outputs: the true ones, then zeros.
  const auto y = model.forward(x);
  const auto padded_y = padded.forward(padded_x);
  for (int b = 0; b < batch; ++b)
    for (int c = 0; c < 16; ++c) {
      const double got = padded_y.data()[b * 16 + c];
      if (c < 3) {
        CHECK(got == doctest::Approx(y.data()[b * 3 + c]).epsilon(1e-12));
      } else {
        CHECK(got == 0.0);
      }
    }

  // Gradients of a summed squared error against targets that are zero on the padded outputs (so
  // their output gradient is zero, as the kernels get it): the true network's, zeros elsewhere.
  etnn::Tensor<double, etnn::Shape<3>> target(batch);
  etnn::test::fill_uniform(target.data(), target.size(), 6);
  etnn::Tensor<double, etnn::Shape<16>> padded_target(batch);
  for (std::size_t k = 0; k < padded_target.size(); ++k)
    padded_target.data()[k] = etnn::expr::detail::column_copy_element(target.data(), 3, 16, k);
  etnn::loss::MSE loss({.reduction = etnn::loss::Reduction::sum});
  etnn::optim::SGD opt(model, {.lr = 0.0f});
  etnn::optim::SGD padded_opt(padded, {.lr = 0.0f});
  etnn::Trainer trainer(model, loss, opt);
  etnn::Trainer padded_trainer(padded, loss, padded_opt);
  model.zero_grad();
  padded.zero_grad();
  trainer.accumulate_gradients(x, target);
  padded_trainer.accumulate_gradients(padded_x, padded_target);
  for (std::size_t j = 0; j < Padding::padded_params; ++j) {
    const std::size_t i = Padding::true_index(j);
    INFO("padded parameter ", j);
    if (i < Padding::num_params) {
      CHECK(padded.gradients()[j] == doctest::Approx(model.gradients()[i]).epsilon(1e-12));
    } else {
      CHECK(padded.gradients()[j] == 0.0);
    }
  }
}

namespace {

// The values a ReLU must agree on across devices, float or double.
template <class T>
std::vector<T> special_values() {
  using limits = std::numeric_limits<T>;
  return {limits::quiet_NaN(), -limits::quiet_NaN(), limits::signaling_NaN(), T(0), -T(0),
          limits::infinity(), -limits::infinity(), limits::denorm_min(), -limits::denorm_min(),
          limits::min() / T(3), -limits::min() / T(3), limits::min(), -limits::min(), T(-1.5), T(2.5),
          limits::max(), limits::lowest()};
}

template <class T>
auto bits(T v) {
  using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  return std::bit_cast<Bits>(v);
}

// The fused chain's ReLU, as the kernels apply it (cuda/fused_mlp/net.hpp): forward and backward.
template <class T>
T fused_relu(T z) {
  T unused;
  return etnn::fn::activate(etnn::fn::Relu{}, z, &unused);
}
template <class T>
T fused_relu_chain(T da, T a) {
  return etnn::fn::chain_kept(etnn::fn::Relu{}, da, &a, static_cast<const T*>(nullptr), 0);
}

template <class T>
void check_relu_parity() {
  const std::vector<T> values = special_values<T>();
  for (const T x : values) {
    INFO("x = ", x, " (bits ", bits(x), ")");
    const T fused = fused_relu(x), cpu = etnn::fn::Relu{}(x);
    if (std::isnan(x)) {
      CHECK(std::isnan(fused));  // kept for the non-finite guard, not turned into 0
    } else {
      CHECK(bits(fused) == bits(cpu));  // to the bit: +-0 and denormals too
      CHECK(fused == (x > T(0) ? x : T(0)));
    }
    CHECK(std::isnan(fused) == std::isnan(cpu));
    // The chain's gradient dZ: dA where A > 0, else 0, as the CPU's dense backward forms it.
    for (const T da : values) {
      INFO("dA = ", da);
      const T fused_dz = fused_relu_chain(da, fused);
      const T cpu_dz = etnn::fn::chain(etnn::fn::Relu{}, da, cpu, cpu);
      if (std::isnan(cpu_dz)) {
        CHECK(std::isnan(fused_dz));
      } else {
        CHECK(bits(fused_dz) == bits(cpu_dz));
      }
    }
  }
}

}  // namespace

TEST_CASE("the fused chain's activations are the CPU's functors; its ReLU keeps NaN, +-0, +-inf and denormals") {
  // The kernels apply the network's own activation type (nn::detail::FusedActivation), no copy of it.
  static_assert(fused_hidden<etnn::fn::Relu> && fused_hidden<etnn::fn::Tanh> && fused_hidden<etnn::fn::Silu>);
  static_assert(!fused_hidden<etnn::fn::Sigmoid> && !fused_hidden<etnn::fn::Gelu> && !fused_hidden<etnn::fn::Identity>);
  // Padding needs f(0) = 0 (a padded unit stays 0) and a finite f'(0) (its zero gradient stays 0).
  for (const double zero : {etnn::fn::Relu{}(0.0), etnn::fn::Tanh{}(0.0), etnn::fn::Silu{}(0.0)}) CHECK(zero == 0.0);
  CHECK(etnn::fn::Silu{}.derivative(0.0, 0.0) == 0.5);
  CHECK(etnn::fn::Tanh{}.derivative(0.0, 0.0) == 1.0);
  check_relu_parity<float>();
  check_relu_parity<double>();
  // A NaN or infinite gradient at an inactive unit gives 0, as the CPU's ReLU backward and PyTorch's
  // threshold_backward do (the guard still sees it in the gradients of the layer above).
  CHECK(fused_relu_chain(std::numeric_limits<float>::infinity(), 0.0f) == 0.0f);
  CHECK(fused_relu_chain(std::numeric_limits<float>::quiet_NaN(), -0.0f) == 0.0f);
  CHECK(std::isnan(fused_relu_chain(std::numeric_limits<float>::quiet_NaN(), 2.0f)));
}

TEST_CASE("the fused chain's ReLU gives what a CPU relu layer gives, NaN included") {
  const std::vector<float> values = special_values<float>();
  constexpr int n = 17;
  REQUIRE(values.size() == n);
  using Net = decltype(nn::input<n> >> nn::relu);
  etnn::Model<Net, float> model(0);
  etnn::Tensor<float, etnn::Shape<n>> x(1);
  for (int i = 0; i < n; ++i) x.data()[i] = values[static_cast<std::size_t>(i)];
  const auto y = model.forward(x);
  for (int i = 0; i < n; ++i) {
    const float v = values[static_cast<std::size_t>(i)];
    INFO("x = ", v);
    const float fused = fused_relu(v), cpu = y.data()[i];
    CHECK(std::isnan(fused) == std::isnan(cpu));
    if (!std::isnan(cpu)) CHECK(bits(fused) == bits(cpu));
  }
}
