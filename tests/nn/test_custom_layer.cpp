// A user-defined layer (examples/prelu.hpp, PyTorch's nn.PReLU written outside the library) is a
// layer like the built-in ones: it composes with >>, names its parameters as PyTorch, computes the
// naive reference's forward, passes the same gradient check (with a trainable layer before it, so
// its input gradient is checked), accumulates its gradients, and round-trips through a checkpoint.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "../../examples/prelu.hpp"
#include "support/network_gradcheck.hpp"

namespace nn = etnn::nn;
using etnn::test::fill_uniform;

namespace {

// The gradient check with the PReLU slopes (parameter tensor `slopes`, "<index>.weight" of shape
// (C)) moved off their common initial value 0.25.
template <class Net>
void check_gradients(const char* name, const std::string& slopes, int batch = 3, std::uint64_t seed = 1) {
  etnn::test::check_network_gradients<Net>(name, batch, seed, [&](etnn::Model<Net, double>& model) {
    int found = 0;
    for (const auto& p : model.named_parameters())
      if (p.name == slopes) fill_uniform(model.parameters() + p.offset, p.numel, seed + 50, 0.8), ++found;
    REQUIRE(found == 1);
  });
}

}  // namespace

TEST_CASE("custom layer: composes with >>, PyTorch names and shapes, initial slope 0.25") {
  using Net = decltype(nn::input<6> >> nn::linear<5> >> custom::prelu >> nn::linear<3>);
  static_assert(Net::num_params == 6 * 5 + 5 + 5 + 5 * 3 + 3);
  static_assert(std::is_same_v<Net::output_shape, etnn::Shape<3>>);
  CHECK(Net::describe() == "input<6> >> linear<5> >> prelu >> linear<3>");
  const auto params = etnn::Model<Net>::named_parameters();
  REQUIRE(params.size() == 5);
  CHECK(params[2].name == "1.weight");
  CHECK(params[2].shape == std::vector<int>{5});
  CHECK(params[2].offset == 128);  // linear<5>'s weight (30) and bias (5) each take 64, aligned
  CHECK(params[3].name == "2.weight");
  etnn::Model<Net> model(3);
  CHECK(std::all_of(model.parameters() + 128, model.parameters() + 133, [](float a) { return a == 0.25f; }));
  // Per channel of an image; another initial slope.
  using Conv = decltype(nn::input<1, 5, 5> >> nn::conv2d<4, 3> >> custom::prelu_with<std::ratio<1, 10>>);
  CHECK(Conv::describe() == "input<1,5,5> >> conv2d<4,3,stride<1>,pad<0>> >> prelu<1/10>");
  const auto conv_params = etnn::Model<Conv>::named_parameters();
  REQUIRE(conv_params.size() == 3);
  CHECK(conv_params[2].name == "1.weight");
  CHECK(conv_params[2].shape == std::vector<int>{4});
  etnn::Model<Conv, double> conv;
  CHECK(conv.parameters()[conv_params[2].offset + 3] == 0.1);
  CHECK(etnn::summary<Net>().find("1  prelu      (5)                5  1.weight (5)\n") != std::string::npos);
}

TEST_CASE("custom layer forward equals the naive PReLU, per channel of (C, H, W)") {
  using Net = decltype(nn::input<3, 2, 2> >> custom::prelu);
  etnn::Model<Net, double> model;
  const double slopes[3] = {-0.5, 0.3, 2.0};
  std::copy(slopes, slopes + 3, model.parameters());
  etnn::Tensor<double, etnn::Shape<3, 2, 2>> x(4);
  fill_uniform(x.data(), x.size(), 5, 2.0);
  x.data()[0] = 0.0;
  const auto y = model.forward(x);
  for (int b = 0; b < 4; ++b)
    for (int c = 0; c < 3; ++c)
      for (int s = 0; s < 4; ++s) {
        const std::size_t i = static_cast<std::size_t>((b * 3 + c) * 4 + s);
        const double v = x.data()[i];
        CHECK(y.data()[i] == std::max(0.0, v) + slopes[c] * std::min(0.0, v));
      }
  model.eval();  // no mode dependence
  const auto z = model.forward(x);
  CHECK(std::equal(y.data(), y.data() + y.size(), z.data()));
}

TEST_CASE("gradcheck: custom layer after linear and conv2d, and as the first trainable layer") {
  check_gradients<decltype(nn::input<6> >> nn::linear<5> >> custom::prelu >> nn::linear<3>)>("linear + prelu",
                                                                                             "1.weight");
  check_gradients<decltype(nn::input<2, 4, 4> >> nn::conv2d<3, 3> >> custom::prelu >> nn::flatten >>
                           nn::linear<3>)>("conv2d + prelu per channel", "1.weight");
  // No layer with parameters before it: its input gradient is not computed (dx is null).
  check_gradients<decltype(nn::input<6> >> custom::prelu >> nn::linear<3>)>("prelu first", "0.weight");
  // Two in a row, in place on the same gradient buffer.
  check_gradients<decltype(nn::input<4> >> nn::linear<4> >> custom::prelu >> custom::prelu >> nn::linear<3>)>(
      "prelu >> prelu", "1.weight");
  // Inside a residual block: y = x + block(x).
  check_gradients<decltype(nn::input<5> >> nn::linear<5> >> nn::residual(nn::linear<4> >> custom::prelu >> nn::linear<5>) >>
                           nn::linear<3>)>("residual(linear >> prelu >> linear)", "1.block.1.weight");
}

TEST_CASE("custom layer gradients accumulate over micro-batches") {
  using Net = decltype(nn::input<6> >> nn::linear<5> >> custom::prelu >> nn::linear<3>);
  etnn::Model<Net, double> model(2);
  etnn::Tensor<double, etnn::Shape<6>> x(4);
  fill_uniform(x.data(), x.size(), 9, 2.0);
  const std::vector<int> y{0, 1, 2, 0};
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.0f});
  etnn::Trainer trainer(model, loss, opt);
  model.zero_grad();
  trainer.accumulate_gradients(x, y);
  const std::vector<double> once(model.gradients(), model.gradients() + Net::flat_size);
  trainer.accumulate_gradients(x, y);
  const double* g = model.gradients();
  const double* slopes = g + etnn::test::parameter_offset<decltype(model)>("1.weight");
  CHECK(std::any_of(slopes, slopes + 5, [](double v) { return v != 0.0; }));
  for (std::size_t i = 0; i < Net::flat_size; ++i) CHECK(g[i] == doctest::Approx(2 * once[i]).epsilon(1e-12));
}

TEST_CASE("custom layer parameters round-trip through a checkpoint") {
  using Net = decltype(nn::input<6> >> nn::linear<5> >> custom::prelu >> nn::linear<3>);
  const auto dir = std::filesystem::temp_directory_path() / ("etnn-custom-layer-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  etnn::Model<Net> a(1), b(2);
  fill_uniform(a.parameters() + etnn::test::parameter_offset<decltype(a)>("1.weight"), 5, 11, 0.5);  // the slopes
  etnn::io::save(a, dir / "prelu.safetensors");
  etnn::io::load(b, dir / "prelu.safetensors");
  std::filesystem::remove_all(dir);
  CHECK(std::equal(a.parameters(), a.parameters() + Net::flat_size, b.parameters()));
  etnn::Tensor<float, etnn::Shape<6>> x(3);
  fill_uniform(x.data(), x.size(), 12, 2.0);
  const auto ya = a.forward(x), yb = b.forward(x);
  CHECK(std::equal(ya.data(), ya.data() + ya.size(), yb.data()));
}
