// nn::residual and nn::concat: shapes, PyTorch-style nested names, forward against the blocks
// run as networks of their own, and gradient checks with trainable layers around them.
#include <doctest/doctest.h>

#include <vector>

#include "support/network_gradcheck.hpp"

namespace nn = etnn::nn;
using etnn::test::fill_uniform;
using etnn::test::check_network_gradients;

namespace {

std::vector<std::string> names_of(const std::vector<etnn::NamedParameter>& params) {
  std::vector<std::string> names;
  for (const auto& p : params) names.push_back(p.name);
  return names;
}

}  // namespace

TEST_CASE("residual: y = x + block(x), names as a module holding nn.Sequential `block`") {
  constexpr auto block = nn::linear<6> >> nn::relu >> nn::batch_norm >> nn::linear<6>;
  using Net = decltype(nn::input<6> >> nn::residual(block) >> nn::linear<2>);
  using Block = decltype(nn::input<6> >> nn::linear<6> >> nn::relu >> nn::batch_norm >> nn::linear<6>);
  static_assert(Net::num_params == Block::num_params + 6 * 2 + 2);
  CHECK(Net::describe() == "input<6> >> residual(linear<6> >> relu >> batch_norm >> linear<6>) >> linear<2>");
  CHECK(names_of(etnn::Model<Net>::named_parameters()) ==
        std::vector<std::string>{"0.block.0.weight", "0.block.0.bias", "0.block.2.weight", "0.block.2.bias",
                                 "0.block.3.weight", "0.block.3.bias", "1.weight", "1.bias"});
  CHECK(names_of(etnn::Model<Net>::named_buffers()) ==
        std::vector<std::string>{"0.block.2.running_mean", "0.block.2.running_var", "0.block.2.num_batches_tracked"});

  // The block as a network of its own with the same parameters gives block(x).
  etnn::Model<Net, double> model(3);
  etnn::Model<Block, double> alone;
  std::copy_n(model.parameters(), Block::flat_size, alone.parameters());
  model.eval();
  alone.eval();
  etnn::Tensor<double, etnn::Shape<6>> x(4);
  fill_uniform(x.data(), x.size(), 1);
  using Inner = decltype(nn::input<6> >> nn::residual(block));
  etnn::Model<Inner, double> inner;
  std::copy_n(model.parameters(), Block::flat_size, inner.parameters());
  inner.eval();
  const auto y = inner.forward(x);
  const auto b = alone.forward(x);
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(y.data()[i] == doctest::Approx(x.data()[i] + b.data()[i]));
}

TEST_CASE("concat: [a(x), b(x)] per sample, names as nn.ModuleList `branches`") {
  using Net = decltype(nn::input<5> >> nn::concat(nn::linear<3> >> nn::tanh, nn::linear<2>) >> nn::linear<2>);
  static_assert(Net::num_params == (5 * 3 + 3) + (5 * 2 + 2) + (5 * 2 + 2));
  CHECK(names_of(etnn::Model<Net>::named_parameters()) ==
        std::vector<std::string>{"0.branches.0.0.weight", "0.branches.0.0.bias", "0.branches.1.0.weight",
                                 "0.branches.1.0.bias", "1.weight", "1.bias"});
  using Cat = decltype(nn::input<5> >> nn::concat(nn::linear<3> >> nn::tanh, nn::linear<2>));
  using A = decltype(nn::input<5> >> nn::linear<3> >> nn::tanh);
  using B = decltype(nn::input<5> >> nn::linear<2>);
  etnn::Model<Cat, double> cat(2);
  etnn::Model<A, double> a;
  etnn::Model<B, double> b;
  std::copy_n(cat.parameters(), A::flat_size, a.parameters());
  std::copy_n(cat.parameters() + A::flat_size, B::flat_size, b.parameters());
  etnn::Tensor<double, etnn::Shape<5>> x(3);
  fill_uniform(x.data(), x.size(), 4);
  const auto y = cat.forward(x);
  const auto ya = a.forward(x);
  const auto yb = b.forward(x);
  for (int r = 0; r < 3; ++r) {
    for (int j = 0; j < 3; ++j) CHECK(y.data()[r * 5 + j] == ya.data()[r * 3 + j]);
    for (int j = 0; j < 2; ++j) CHECK(y.data()[r * 5 + 3 + j] == yb.data()[r * 2 + j]);
  }
}

TEST_CASE("gradcheck: residual and concat blocks, nested, with conv and batch norm inside") {
  check_network_gradients<decltype(nn::input<6> >> nn::linear<5> >>
                           nn::residual(nn::linear<4> >> nn::gelu >> nn::linear<5>) >> nn::relu >> nn::linear<3>)>(
      "residual MLP");
  check_network_gradients<decltype(nn::input<2, 5, 5> >> nn::conv2d<3, 3, nn::pad<1>> >>
                           nn::residual(nn::conv2d<3, 3, nn::pad<1>> >> nn::batch_norm >> nn::relu) >> nn::flatten >>
                           nn::linear<3>)>("residual conv + batch_norm", 4);
  check_network_gradients<decltype(nn::input<6> >> nn::linear<5> >>
                           nn::concat(nn::linear<3> >> nn::sigmoid, nn::residual(nn::linear<5> >> nn::tanh) >> nn::linear<2>) >>
                           nn::linear<3>)>("concat with a residual branch");
  // A residual first in the network: its block's first layer needs no input gradient.
  check_network_gradients<decltype(nn::input<4> >> nn::residual(nn::linear<4> >> nn::tanh) >> nn::linear<3>)>(
      "residual first");
}

TEST_CASE("combinators train, save and load like any layer") {
  using Net = decltype(nn::input<8> >> nn::residual(nn::linear<8> >> nn::batch_norm >> nn::relu) >>
                       nn::concat(nn::linear<4>, nn::dropout >> nn::linear<4>) >> nn::linear<2>);
  etnn::Model<Net> model(1);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD sgd(model, {.lr = 0.1f});
  etnn::Trainer trainer(model, loss, sgd);
  etnn::Tensor<float, etnn::Shape<8>> x(16);
  fill_uniform(x.data(), x.size(), 3);
  std::vector<int> y(16);
  for (int i = 0; i < 16; ++i) y[static_cast<std::size_t>(i)] = x.data()[i * 8] > 0;
  const float first = trainer.step(x, y);
  float last = first;
  for (int i = 0; i < 50; ++i) last = trainer.step(x, y);
  CHECK(last < first);
  CHECK(model.buffers()[128] == 51.0f);  // num_batches_tracked of the block's batch norm, after two aligned tensors
  etnn::io::save(model, "combinators.safetensors");
  etnn::Model<Net> loaded(99);
  etnn::io::load(loaded, "combinators.safetensors");
  CHECK(std::equal(model.parameters(), model.parameters() + Net::flat_size, loaded.parameters()));
  CHECK(std::equal(model.buffers(), model.buffers() + etnn::Model<Net>::num_buffers, loaded.buffers()));
}
