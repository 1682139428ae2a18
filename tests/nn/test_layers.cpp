// The layers of issue 3 (conv2d, pooling, batch/layer norm, softmax, dropout): forward against
// naive references written out loop by loop, and gradient checks in double precision through
// whole networks, with a trainable layer before each one so that its input gradient is checked.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "support/naive_reference.hpp"
#include "support/network_gradcheck.hpp"
#include "support/thread_count.hpp"

namespace nn = etnn::nn;
using etnn::test::fill_uniform;
using etnn::test::gradcheck;
using etnn::test::check_network_gradients;
using etnn::test::naive_conv;
using etnn::test::naive_pool;

namespace {

template <class Y>
void check_close(const Y& got, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(got.data()[i] == doctest::Approx(want[i]).epsilon(tol));
}

}  // namespace

TEST_CASE("conv2d: shapes, PyTorch names and initialisation bounds") {
  using Net = decltype(nn::input<3, 9, 8> >> nn::conv2d<4, 3, nn::stride<2>, nn::pad<1>>);
  static_assert(std::is_same_v<Net::output_shape, etnn::Shape<4, 5, 4>>);
  static_assert(Net::num_params == 4 * 3 * 3 * 3 + 4);
  const auto params = etnn::Model<Net>::named_parameters();
  REQUIRE(params.size() == 2);
  CHECK(params[0].name == "0.weight");
  CHECK(params[0].shape == std::vector<int>{4, 3, 3, 3});
  CHECK(params[1].shape == std::vector<int>{4});
  etnn::Model<Net> model(3);
  const double bound = 1.0 / std::sqrt(27.0);
  for (std::size_t i = 0; i < Net::flat_size; ++i) CHECK(std::abs(model.parameters()[i]) <= bound);
  CHECK(Net::describe() == "input<3,9,8> >> conv2d<4,3,stride<2>,pad<1>>");
}

TEST_CASE("conv2d forward equals the naive convolution (stride, padding, several channels)") {
  using Net = decltype(nn::input<3, 7, 6> >> nn::conv2d<4, 3, nn::stride<2>, nn::pad<1>>);
  etnn::Model<Net, double> model(5);
  etnn::Tensor<double, etnn::Shape<3, 7, 6>> x(3);
  fill_uniform(x.data(), x.size(), 9);
  const auto y = model.forward(x);
  const double* w = model.parameters();
  check_close(y, naive_conv(x.data(), w, w + etnn::test::parameter_offset<decltype(model)>("0.bias"), 3, 3, 7, 6, 4, 3, 2, 1));
}

TEST_CASE("conv2d fused with relu equals conv then relu") {
  using Fused = decltype(nn::input<2, 6, 6> >> nn::conv2d<3, 5, nn::pad<2>> >> nn::relu);
  etnn::Model<Fused, double> model(2);
  etnn::Tensor<double, etnn::Shape<2, 6, 6>> x(2);
  fill_uniform(x.data(), x.size(), 4);
  const double* w = model.parameters();
  auto want = naive_conv(x.data(), w, w + etnn::test::parameter_offset<decltype(model)>("0.bias"), 2, 2, 6, 6, 3, 5, 1, 2);
  for (auto& v : want) v = std::max(v, 0.0);
  check_close(model.forward(x), want);
}

TEST_CASE("pooling forward equals the naive window max and mean") {
  using Max = decltype(nn::input<2, 7, 7> >> nn::max_pool2d<3, nn::stride<2>, nn::pad<1>>);
  using Avg = decltype(nn::input<2, 7, 7> >> nn::avg_pool2d<3, nn::stride<2>, nn::pad<1>>);
  using Plain = decltype(nn::input<1, 28, 28> >> nn::max_pool2d<2>);
  static_assert(std::is_same_v<Max::output_shape, etnn::Shape<2, 4, 4>>);
  static_assert(std::is_same_v<Plain::output_shape, etnn::Shape<1, 14, 14>>);
  etnn::Tensor<double, etnn::Shape<2, 7, 7>> x(3);
  fill_uniform(x.data(), x.size(), 12);
  etnn::Model<Max, double> max_model;
  etnn::Model<Avg, double> avg_model;
  check_close(max_model.forward(x), naive_pool(x.data(), 6, 7, 7, 3, 2, 1, true));
  check_close(avg_model.forward(x), naive_pool(x.data(), 6, 7, 7, 3, 2, 1, false));
}

TEST_CASE("gradcheck: conv2d (strided, padded, fused activations) and pooling") {
  check_network_gradients<decltype(nn::input<2, 7, 6> >> nn::conv2d<3, 3, nn::stride<2>, nn::pad<1>> >> nn::tanh >>
                           nn::conv2d<2, 2> >> nn::flatten >> nn::linear<3>)>("conv2d + tanh");
  check_network_gradients<decltype(nn::input<1, 6, 6> >> nn::conv2d<2, 3, nn::pad<1>> >> nn::gelu >> nn::conv2d<2, 3> >>
                           nn::relu >> nn::flatten >> nn::linear<3>)>("conv2d + gelu (keeps Z)");
  check_network_gradients<decltype(nn::input<2, 6, 6> >> nn::conv2d<2, 3, nn::pad<1>> >> nn::max_pool2d<3, nn::stride<2>, nn::pad<1>> >>
                           nn::flatten >> nn::linear<3>)>("max_pool2d, overlapping windows");
  check_network_gradients<decltype(nn::input<2, 6, 6> >> nn::conv2d<2, 3, nn::pad<1>> >> nn::avg_pool2d<2> >>
                           nn::flatten >> nn::linear<3>)>("avg_pool2d");
}

// The CPU sums conv2d's weight and bias gradients over groups of consecutive samples (at most
// 16, fewer for large layers), then adds the groups' partial sums in order (cpu/conv.hpp).
static_assert(etnn::cpu::conv_gradient_groups<100>(1) == 1);
static_assert(etnn::cpu::conv_gradient_groups<100>(5) == 5);
static_assert(etnn::cpu::conv_gradient_groups<100>(64) == 16);
static_assert(etnn::cpu::conv_gradient_groups<(std::size_t{1} << 20) / 3>(64) == 3);
static_assert(etnn::cpu::conv_gradient_groups<(std::size_t{1} << 20) + 1>(64) == 1);

TEST_CASE("gradcheck: conv2d at one sample (one group) and at more samples than groups (groups of two)") {
  using Net = decltype(nn::input<2, 6, 5> >> nn::conv2d<3, 3, nn::pad<1>> >> nn::relu >> nn::conv2d<2, 3> >>
                       nn::flatten >> nn::linear<3>);
  check_network_gradients<Net>("conv2d, batch 1", 1);
  check_network_gradients<Net>("conv2d, batch 19", 19);
}

TEST_CASE("conv2d's gradients are bitwise the same on 1, 2 and 3 threads, with one sample group or many") {
  // The first layer's products (32 x 72 x 256 per sample) are large enough for a batch of one to
  // split each of them across threads.
  using Net = decltype(nn::input<8, 16, 16> >> nn::conv2d<32, 3, nn::pad<1>> >> nn::relu >> nn::max_pool2d<2> >>
                       nn::conv2d<6, 3> >> nn::tanh >> nn::flatten >> nn::linear<5>);
  for (const int batch : {1, 5, 37}) {
    auto gradients_on = [batch](int threads) {
      etnn::test::ThreadCount pool(threads);
      etnn::Model<Net> model(7);
      std::vector<float> x(static_cast<std::size_t>(batch) * 8 * 16 * 16);
      fill_uniform(x.data(), x.size(), 8, 1.0);
      std::vector<int> labels(static_cast<std::size_t>(batch));
      for (int b = 0; b < batch; ++b) labels[b] = b % 5;
      etnn::loss::CrossEntropy loss;
      etnn::optim::SGD opt(model, {.lr = 0.1f});
      etnn::Trainer trainer(model, loss, opt);
      model.zero_grad();
      trainer.accumulate_gradients(etnn::TensorView<const float, etnn::Shape<8, 16, 16>>(x.data(), batch), labels);
      return std::vector<float>(model.gradients(), model.gradients() + Net::flat_size);
    };
    CAPTURE(batch);
    const auto one = gradients_on(1);
    CHECK(std::any_of(one.begin(), one.end(), [](float g) { return g != 0.0f; }));
    for (const int threads : {2, 3}) {
      CAPTURE(threads);
      CHECK(gradients_on(threads) == one);
    }
  }
}

TEST_CASE("batch_norm: training uses batch statistics and updates the running ones like PyTorch") {
  using Net = decltype(nn::input<3, 2, 2> >> nn::batch_norm);
  etnn::Model<Net, double> model;
  const auto buffers = etnn::Model<Net, double>::named_buffers();
  REQUIRE(buffers.size() == 3);
  CHECK(buffers[0].name == "0.running_mean");
  CHECK(buffers[2].name == "0.num_batches_tracked");
  CHECK(buffers[2].shape.empty());
  // Each tensor on a 256-byte boundary: gamma at 0 and beta at 64; running_mean at 0, running_var
  // at 64 and num_batches_tracked at 128.
  CHECK(buffers[1].offset == 64);
  CHECK(buffers[2].offset == 128);
  const double* gamma = model.parameters();
  double* beta = model.parameters() + 64;
  model.parameters()[1] = 2.0;  // gamma of channel 1
  beta[2] = -1.0;
  etnn::Tensor<double, etnn::Shape<3, 2, 2>> x(4);
  fill_uniform(x.data(), x.size(), 3, 2.0);
  const auto y = model.forward(x);
  const double* running = model.buffers();
  for (int c = 0; c < 3; ++c) {
    double mean = 0, var = 0;
    for (int b = 0; b < 4; ++b)
      for (int s = 0; s < 4; ++s) mean += x.data()[(b * 3 + c) * 4 + s] / 16;
    for (int b = 0; b < 4; ++b)
      for (int s = 0; s < 4; ++s) var += std::pow(x.data()[(b * 3 + c) * 4 + s] - mean, 2) / 16;
    for (int b = 0; b < 4; ++b)
      for (int s = 0; s < 4; ++s) {
        const std::size_t i = static_cast<std::size_t>((b * 3 + c) * 4 + s);
        const double want = gamma[c] * (x.data()[i] - mean) / std::sqrt(var + 1e-5) + beta[c];
        CHECK(y.data()[i] == doctest::Approx(want).epsilon(1e-12));
      }
    CHECK(running[c] == doctest::Approx(0.1 * mean).epsilon(1e-12));
    CHECK(running[64 + c] == doctest::Approx(0.9 + 0.1 * var * 16 / 15).epsilon(1e-12));
  }
  CHECK(running[128] == 1.0);
  // eval: the running statistics, and nothing changes.
  model.eval();
  const std::vector<double> before(running, running + 129);
  const auto z = model.forward(x);
  CHECK(std::vector<double>(running, running + 129) == before);
  for (int c = 0; c < 3; ++c) {
    const std::size_t i = static_cast<std::size_t>(c * 4);
    const double want = gamma[c] * (x.data()[i] - running[c]) / std::sqrt(running[64 + c] + 1e-5) + beta[c];
    CHECK(z.data()[i] == doctest::Approx(want).epsilon(1e-12));
  }
}

TEST_CASE("batch_norm refuses batch statistics of a single value") {
  using Net = decltype(nn::input<4> >> nn::batch_norm);
  etnn::Model<Net> model;
  etnn::Tensor<float, etnn::Shape<4>> x(1);
  CHECK_THROWS_WITH_AS(model.forward(x), doctest::Contains("more than one value per channel"), etnn::ShapeError);
  model.eval();
  CHECK_NOTHROW(model.forward(x));
}

TEST_CASE("gradcheck: batch_norm (1d and 2d, training and eval) and layer_norm") {
  check_network_gradients<decltype(nn::input<5> >> nn::linear<4> >> nn::batch_norm >> nn::relu >> nn::linear<3>)>(
      "batch_norm 1d", 4);
  check_network_gradients<decltype(nn::input<2, 5, 5> >> nn::conv2d<3, 3> >> nn::batch_norm >> nn::tanh >> nn::flatten >>
                           nn::linear<3>)>("batch_norm 2d", 3);
  check_network_gradients<decltype(nn::input<6> >> nn::linear<5> >> nn::layer_norm >> nn::linear<3>)>("layer_norm");
  check_network_gradients<decltype(nn::input<2, 4, 4> >> nn::conv2d<2, 3> >> nn::layer_norm >> nn::flatten >>
                           nn::linear<3>)>("layer_norm over (C, H, W)");
  // eval mode: an affine map with the running statistics.
  using Net = decltype(nn::input<5> >> nn::linear<4> >> nn::batch_norm >> nn::linear<3>);
  etnn::Model<Net, double> model(4);
  fill_uniform(model.buffers(), 8, 5, 0.5);
  for (int c = 0; c < 4; ++c) model.buffers()[4 + c] += 1.0;  // positive variances
  model.eval();
  etnn::Tensor<double, etnn::Shape<5>> x(2);
  fill_uniform(x.data(), x.size(), 6);
  etnn::loss::CrossEntropy loss;
  const auto r = gradcheck(model, loss, x, std::vector<int>{1, 2});
  INFO(r.first_failure);
  CHECK(r.failed == 0);
}

TEST_CASE("layer_norm forward normalises each sample (of a flat or image input)") {
  using Net = decltype(nn::input<1, 2, 3> >> nn::layer_norm);
  etnn::Model<Net, double> model;
  CHECK(etnn::Model<Net, double>::named_parameters()[0].shape == std::vector<int>{1, 2, 3});
  etnn::Tensor<double, etnn::Shape<1, 2, 3>> x(2);
  fill_uniform(x.data(), x.size(), 8, 3.0);
  const auto y = model.forward(x);
  for (int b = 0; b < 2; ++b) {
    double mean = 0, var = 0;
    for (int j = 0; j < 6; ++j) mean += x.data()[b * 6 + j] / 6;
    for (int j = 0; j < 6; ++j) var += std::pow(x.data()[b * 6 + j] - mean, 2) / 6;
    for (int j = 0; j < 6; ++j)
      CHECK(y.data()[b * 6 + j] == doctest::Approx((x.data()[b * 6 + j] - mean) / std::sqrt(var + 1e-5)));
  }
}

TEST_CASE("softmax and log_softmax: rows sum to one even for logits of +-1e4") {
  using Soft = decltype(nn::input<5> >> nn::softmax);
  using LogSoft = decltype(nn::input<5> >> nn::log_softmax);
  etnn::Model<Soft> soft;
  etnn::Model<LogSoft> log_soft;
  etnn::Tensor<float, etnn::Shape<5>> x(3);
  const float rows[3][5] = {{1e4f, -1e4f, 0, 1e4f, 3}, {-1e4f, -1e4f, -1e4f, -1e4f, -1e4f}, {0.5f, -2, 3, 1, 0}};
  std::copy(&rows[0][0], &rows[0][0] + 15, x.data());
  const auto y = soft.forward(x);
  const auto ly = log_soft.forward(x);
  for (int b = 0; b < 3; ++b) {
    double sum = 0, max = -1e30;
    for (int j = 0; j < 5; ++j) max = std::max(max, double(rows[b][j]));
    double ref_sum = 0;
    for (int j = 0; j < 5; ++j) ref_sum += std::exp(double(rows[b][j]) - max);
    for (int j = 0; j < 5; ++j) {
      const float v = y.data()[b * 5 + j];
      REQUIRE(std::isfinite(v));
      sum += v;
      const double ref = std::exp(double(rows[b][j]) - max) / ref_sum;
      CHECK(v == doctest::Approx(ref).epsilon(1e-6));
      CHECK(ly.data()[b * 5 + j] == doctest::Approx(double(rows[b][j]) - max - std::log(ref_sum)).epsilon(1e-6));
    }
    CHECK(std::abs(sum - 1.0) <= 1e-6);
  }
}

TEST_CASE("gradcheck: softmax and log_softmax") {
  check_network_gradients<decltype(nn::input<5> >> nn::linear<4> >> nn::softmax >> nn::linear<3>)>("softmax");
  check_network_gradients<decltype(nn::input<5> >> nn::linear<4> >> nn::log_softmax >> nn::linear<3>)>("log_softmax");
}

TEST_CASE("dropout: PyTorch's scaling, a fresh seeded mask per training pass, identity in eval") {
  using Net = decltype(nn::input<1000> >> nn::dropout_with<std::ratio<1, 5>>);
  etnn::Model<Net, double> a(7), b(7);
  etnn::Tensor<double, etnn::Shape<1000>> x(4);
  std::fill_n(x.data(), x.size(), 1.0);
  const auto y1 = a.forward(x), y2 = a.forward(x), y1_again = b.forward(x);
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < y1.size(); ++i) {
    CHECK((y1.data()[i] == 0.0 || y1.data()[i] == doctest::Approx(1.25)));
    dropped += y1.data()[i] == 0.0;
  }
  CHECK(dropped > 700);  // 800 expected of 4000
  CHECK(dropped < 900);
  CHECK(std::equal(y1.data(), y1.data() + y1.size(), y1_again.data()));   // same seed, same pass: same mask
  CHECK(!std::equal(y1.data(), y1.data() + y1.size(), y2.data()));        // next pass: another mask
  a.eval();
  const auto z = a.forward(x);
  CHECK(std::all_of(z.data(), z.data() + z.size(), [](double v) { return v == 1.0; }));
}

TEST_CASE("dropout backward applies the forward's mask") {
  using L = nn::DropoutLayer<etnn::Shape<50>, std::ratio<1, 2>, 0>;
  std::vector<double> x(100), y(100), dy(100, 3.0);
  fill_uniform(x.data(), x.size(), 2);
  const nn::Pass<double> pass{true, nullptr, nullptr, 1234};
  const double* none = nullptr;
  L::forward(etnn::Cpu{}, pass, none, x.data(), y.data(), static_cast<double*>(nullptr), 2);
  L::backward(etnn::Cpu{}, pass, none, static_cast<double*>(nullptr), x.data(), y.data(), none, dy.data(), dy.data(), 2);
  for (std::size_t i = 0; i < 100; ++i) CHECK(dy[i] == (y[i] == 0.0 ? 0.0 : 6.0));
  // Through a network in eval mode dropout is the identity, and gradients check.
  using Net = decltype(nn::input<5> >> nn::linear<4> >> nn::dropout >> nn::linear<3>);
  etnn::Model<Net, double> model(1);
  model.eval();
  etnn::Tensor<double, etnn::Shape<5>> in(3);
  fill_uniform(in.data(), in.size(), 3);
  etnn::loss::CrossEntropy loss;
  CHECK(gradcheck(model, loss, in, std::vector<int>{0, 1, 2}).failed == 0);
}
