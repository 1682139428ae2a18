// The padding that lets the fully fused bf16 kernels take any MLP with widths up to 128
// (expr/fused_mlp_padding.hpp), checked on the CPU: the index maps are each other's inverse, and the
// padded network, with its parameters and input laid out by them, computes the true network's
// outputs and gradients (double precision), with zeros in every padded place.
#include <doctest/doctest.h>

#include <etnn/etnn.hpp>

#include <cmath>
#include <vector>

#include "support/gradcheck.hpp"

namespace nn = etnn::nn;
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
  static_assert(PaddedMlp<20, 64, 10>::num_params == 64 * (20 + 1) + 10 * (64 + 1));
  static_assert(PaddedMlp<20, 64, 10>::padded_params == 64 * (32 + 1) + 16 * (64 + 1));
}

TEST_CASE("the parameter maps are each other's inverse, and padding is everything else") {
  using Padding = PaddedMlp<20, 40, 128, 3>;
  std::vector<int> hits(Padding::padded_params, 0);
  for (std::size_t i = 0; i < Padding::num_params; ++i) {
    const std::size_t j = Padding::padded_index(i);
    REQUIRE(j < Padding::padded_params);
    CHECK(Padding::true_index(j) == i);
    ++hits[j];
  }
  std::size_t padding = 0;
  for (std::size_t j = 0; j < Padding::padded_params; ++j) {
    CHECK(hits[j] <= 1);
    if (hits[j] == 0) {
      CHECK(Padding::true_index(j) == Padding::num_params);
      ++padding;
    }
  }
  CHECK(padding == Padding::padded_params - Padding::num_params);
}

TEST_CASE("column copies pad with zeros and drop columns") {
  const std::vector<float> m = {1, 2, 3, 4, 5, 6};  // (2, 3)
  std::vector<float> padded(2 * 5), back(2 * 3);
  for (std::size_t k = 0; k < padded.size(); ++k) padded[k] = etnn::expr::detail::column_copy_element(m.data(), 3, 5, k);
  CHECK(padded == std::vector<float>{1, 2, 3, 0, 0, 4, 5, 6, 0, 0});
  for (std::size_t k = 0; k < back.size(); ++k) back[k] = etnn::expr::detail::column_copy_element(padded.data(), 5, 3, k);
  CHECK(back == m);
}

TEST_CASE("a padded MLP computes the true one's outputs and parameter gradients, zeros elsewhere") {
  using Net = decltype(nn::input<20> >> nn::linear<40> >> nn::relu >> nn::linear<3>);
  using Padded = decltype(nn::input<32> >> nn::linear<64> >> nn::relu >> nn::linear<16>);
  using Padding = PaddedMlp<20, 40, 3>;
  static_assert(Padding::num_params == Net::num_params && Padding::padded_params == Padded::num_params);
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
