// SequenceCrossEntropy: CrossEntropy at every position of (B, T, V) scores, with PyTorch's
// ignore_index, checked against CrossEntropy over the B T rows and gradient-checked through a
// causal attention model over token ids.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "support/gradcheck.hpp"

namespace nn = etnn::nn;
using etnn::test::fill_uniform;

namespace {
constexpr int batch = 3, length = 4, classes = 5;
}  // namespace

TEST_CASE("SequenceCrossEntropy is CrossEntropy over the B T positions") {
  etnn::Tensor<double, etnn::Shape<length, classes>> z(batch);
  etnn::Tensor<double, etnn::Shape<classes>> rows(batch * length);
  fill_uniform(z.data(), z.size(), 1, 3.0);
  std::copy(z.data(), z.data() + z.size(), rows.data());
  std::vector<int> y(batch * length);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int>((i * 7) % classes);
  for (auto reduction : {etnn::loss::Reduction::mean, etnn::loss::Reduction::sum}) {
    etnn::loss::SequenceCrossEntropy sequence({.reduction = reduction});
    etnn::loss::CrossEntropy flat({.reduction = reduction});
    std::vector<double> g(z.size()), g_flat(z.size());
    const double value = sequence.value_and_grad(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(y), g.data());
    const double expected =
        flat.value_and_grad(etnn::Cpu{}, etnn::const_view(rows), std::span<const int>(y), g_flat.data());
    CHECK(value == doctest::Approx(expected).epsilon(1e-14));
    for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == doctest::Approx(g_flat[i]).epsilon(1e-14));
  }
}

TEST_CASE("SequenceCrossEntropy: ignored positions add nothing and get no gradient") {
  etnn::Tensor<double, etnn::Shape<length, classes>> z(batch);
  fill_uniform(z.data(), z.size(), 2, 3.0);
  std::vector<int> y(batch * length, 1), kept;
  y[1] = y[6] = y[11] = etnn::loss::ignore_index;
  etnn::Tensor<double, etnn::Shape<classes>> rows(batch * length - 3);
  int r = 0;
  for (int i = 0; i < batch * length; ++i) {
    if (y[i] == etnn::loss::ignore_index) continue;
    std::copy(z.data() + i * classes, z.data() + (i + 1) * classes, rows.data() + r++ * classes);
    kept.push_back(y[i]);
  }
  etnn::loss::SequenceCrossEntropy loss;
  std::vector<double> g(z.size(), 7.0);
  const double value = loss.value_and_grad(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(y), g.data());
  CHECK(value == doctest::Approx(etnn::loss::CrossEntropy{}.value(etnn::Cpu{}, etnn::const_view(rows),
                                                                  std::span<const int>(kept)))
                     .epsilon(1e-14));
  for (int i : {1, 6, 11})
    for (int j = 0; j < classes; ++j) CHECK(g[i * classes + j] == 0.0);
  // Every position ignored: the mean is 0/0, as in PyTorch.
  std::vector<int> none(batch * length, etnn::loss::ignore_index);
  CHECK(std::isnan(loss.value(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(none))));
}

TEST_CASE("SequenceCrossEntropy: a bad label or label count names the sample and position") {
  etnn::Tensor<float, etnn::Shape<length, classes>> z(batch);
  std::fill(z.data(), z.data() + z.size(), 0.0f);
  etnn::loss::SequenceCrossEntropy loss;
  std::vector<int> y(batch * length, 0);
  y[2 * length + 3] = classes;
  CHECK_THROWS_WITH_AS(loss.value(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(y)),
                       doctest::Contains("of sample 2, position 3 is outside [0, 5)"), etnn::ShapeError);
  std::vector<int> short_labels(batch, 0);
  CHECK_THROWS_WITH_AS(loss.value(etnn::Cpu{}, etnn::const_view(z), std::span<const int>(short_labels)),
                       doctest::Contains("one class index per position (12)"), etnn::ShapeError);
}

TEST_CASE("gradcheck: a causal attention language model under SequenceCrossEntropy") {
  using Net = decltype(nn::input_tokens<7, 6> >> nn::embedding<6> >> nn::positional_embedding >>
                       nn::multi_head_attention<2, true> >> nn::layer_norm >> nn::linear<6>);
  etnn::Model<Net, double> model(3);
  etnn::test::fill_parameters_uniform(model, 4, 0.5);
  etnn::Tensor<double, etnn::Tokens<7, 6>> x(2);
  etnn::test::fill_token_ids(x.data(), x.size(), 5, 6);
  std::vector<int> y(2 * 7);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int>(x.data()[(i + 1) % y.size()]);  // next id
  y[3] = etnn::loss::ignore_index;
  etnn::loss::SequenceCrossEntropy loss;
  const auto r = etnn::test::gradcheck(model, loss, x, y);
  INFO(r.first_failure);
  CHECK(r.checked == Net::num_params);
  CHECK(r.failed == 0);
}
