// Gradient checks (double precision, central differences) for every layer, activation and loss
// the foundation provides, through whole networks so that every layer's input gradient is
// exercised by the layers before it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "support/gradcheck.hpp"

namespace nn = etnn::nn;
using etnn::test::gradcheck;

namespace {

constexpr int batch = 3;

// linear -> act fused, then a linear that receives the fused layer's input gradient.
template <class Act>
using Fused = nn::Sequential<nn::Input<5>, nn::Linear<4>, Act, nn::Linear<3>>;
// linear, flatten (breaks fusion), standalone act, linear.
template <class Act>
using Standalone = nn::Sequential<nn::Input<5>, nn::Linear<4>, nn::Flatten, Act, nn::Linear<3>>;

template <class Net>
etnn::test::GradcheckResult check_with_cross_entropy(std::uint64_t seed) {
  etnn::Model<Net, double> model(seed);
  etnn::Tensor<double, etnn::Shape<5>> x(batch);
  etnn::test::fill_uniform(x.data(), x.size(), seed + 100, 2.0);
  const std::vector<int> y{0, 2, 1};
  etnn::loss::CrossEntropy loss;
  return gradcheck(model, loss, x, y);
}

template <class Act>
void check_activation(const char* name) {
  for (auto result : {check_with_cross_entropy<Fused<Act>>(1), check_with_cross_entropy<Standalone<Act>>(2)}) {
    INFO(std::string(name), ": ", result.first_failure);
    CHECK(result.checked == (5 * 4 + 4) + (4 * 3 + 3));
    CHECK(result.failed == 0);
    MESSAGE(std::string(name), " max relative error ", result.max_relative_error);
  }
}

}  // namespace

TEST_CASE("gradcheck: linear + relu (fused and standalone)") { check_activation<nn::ReLU>("relu"); }
TEST_CASE("gradcheck: linear + leaky_relu") { check_activation<nn::LeakyReLU<>>("leaky_relu"); }
TEST_CASE("gradcheck: linear + tanh") { check_activation<nn::Tanh>("tanh"); }
TEST_CASE("gradcheck: linear + sigmoid") { check_activation<nn::Sigmoid>("sigmoid"); }
TEST_CASE("gradcheck: linear + gelu (keeps the pre-activation)") { check_activation<nn::GELU>("gelu"); }
TEST_CASE("gradcheck: linear + silu (keeps the pre-activation)") { check_activation<nn::SiLU>("silu"); }

TEST_CASE("gradcheck: deep network with flatten, mixed activations, MSE") {
  using Net = decltype(nn::input<2, 3> >> nn::flatten >> nn::linear<7> >> nn::gelu >> nn::linear<6> >>
                       nn::tanh >> nn::sigmoid >> nn::linear<4>);
  etnn::Model<Net, double> model(7);
  etnn::Tensor<double, etnn::Shape<2, 3>> x(4);
  etnn::Tensor<double, etnn::Shape<4>> target(4);
  etnn::test::fill_uniform(x.data(), x.size(), 11, 1.5);
  etnn::test::fill_uniform(target.data(), target.size(), 12);
  etnn::loss::MSE loss;
  const auto result = gradcheck(model, loss, x, target);
  INFO(result.first_failure);
  CHECK(result.checked == Net::num_params);
  CHECK(result.failed == 0);
  MESSAGE("deep network max relative error ", result.max_relative_error);
}

TEST_CASE("gradcheck: a single linear layer (the first layer computes no input gradient)") {
  etnn::Model<decltype(nn::input<3> >> nn::linear<2>), double> model(3);
  etnn::Tensor<double, etnn::Shape<3>> x(5);
  etnn::test::fill_uniform(x.data(), x.size(), 5);
  const std::vector<int> y{0, 1, 1, 0, 1};
  etnn::loss::CrossEntropy loss;
  const auto result = gradcheck(model, loss, x, y);
  INFO(result.first_failure);
  CHECK(result.failed == 0);
}

namespace {
// Two fused dense layers in a row: on the CPU the upper one applies the lower one's activation to
// its input gradient in its product's epilogue (nn/program.hpp). A flatten between them breaks
// the pairing and leaves the activation to the lower layer's own pass. Both must give the same
// bits, in float, on rows enough for several register tiles.
template <class Act>
void check_chained_activation_bitwise(const char* name) {
  using Paired = nn::Sequential<nn::Input<37>, nn::Linear<70>, Act, nn::Linear<50>, Act, nn::Linear<9>>;
  using Apart = nn::Sequential<nn::Input<37>, nn::Linear<70>, Act, nn::Flatten, nn::Linear<50>, Act, nn::Flatten,
                               nn::Linear<9>>;
  static_assert(Paired::num_params == Apart::num_params);
  etnn::Model<Paired, float> paired(5);
  etnn::Model<Apart, float> apart(5);
  std::copy_n(paired.parameters(), Paired::flat_size, apart.parameters());
  constexpr int rows = 45;
  etnn::Tensor<float, etnn::Shape<37>> x(rows);
  etnn::test::fill_uniform(x.data(), x.size(), 17, 2.0);
  std::vector<int> y(rows);
  for (int r = 0; r < rows; ++r) y[static_cast<std::size_t>(r)] = (r * 7) % 9;
  auto gradients_of = [&](auto& model) {
    etnn::loss::CrossEntropy loss;
    etnn::optim::SGD opt(model, {.lr = 0.0f});
    etnn::Trainer trainer(model, loss, opt);
    model.zero_grad();
    trainer.accumulate_gradients(x, y);
    return std::vector<float>(model.gradients(), model.gradients() + Paired::flat_size);
  };
  const std::vector<float> g_paired = gradients_of(paired), g_apart = gradients_of(apart);
  INFO(name);
  CHECK(std::memcmp(g_paired.data(), g_apart.data(), g_paired.size() * sizeof(float)) == 0);
}
}  // namespace

TEST_CASE("two fused dense layers in a row: the activation applied in the upper one's product, the same bits") {
  check_chained_activation_bitwise<nn::ReLU>("relu");
  check_chained_activation_bitwise<nn::GELU>("gelu");
  check_chained_activation_bitwise<nn::SiLU>("silu");
  check_chained_activation_bitwise<nn::Tanh>("tanh");
}

TEST_CASE("row blocks of a large weight's gradient: where they are cut") {
  using nn::WeightRowBlocks;
  // mlp784's first layer: 2 blocks of 256 rows.
  constexpr WeightRowBlocks first = WeightRowBlocks::of(512, 784);
  CHECK(first.count == 2);
  CHECK(first.rows == 256);
  CHECK(first.begin(2) == std::size_t{512} * 784);
  CHECK(WeightRowBlocks::of(2048, 784).count == 4);      // at most 4
  CHECK(WeightRowBlocks::of(2048, 784).rows == 512);
  CHECK(WeightRowBlocks::of(512, 512).count == 2);       // exactly two blocks' minimum values
  CHECK(WeightRowBlocks::of(512, 511).count == 1);       // just under it: one product
  CHECK(WeightRowBlocks::of(300, 100000).count == 1);    // fewer rows than two blocks' minimum
  constexpr WeightRowBlocks uneven = WeightRowBlocks::of(600, 512);  // 304 rows (19 tiles of 16), then 296
  CHECK(uneven.count == 2);
  CHECK(uneven.rows == 304);
  CHECK(uneven.begin(2) == std::size_t{600} * 512);
  // A network's bucket cuts: the blocks' starts and the weight's end inside layer 0, then the
  // layers' ends (each tensor aligned: 512 biases, then 5120 weights and 10 biases taking 64).
  using Mlp = nn::Sequential<nn::Input<784>, nn::Linear<512>, nn::ReLU, nn::Linear<10>>;
  using P = etnn::Model<Mlp, float>::program;
  constexpr std::size_t w = std::size_t{512} * 784;
  CHECK(std::vector<std::size_t>(P::gradient_cuts.begin(), P::gradient_cuts.end()) ==
        std::vector<std::size_t>{256 * 784, w, w + 512, w + 512 + 5120 + 64});
}

namespace {
// Backward with the large weights' gradients in row blocks gives the bits of backward without
// them, and reports the blocks final from the last one down, each after its product.
template <class T>
void check_row_blocks(etnn::nn::Gradients gradients) {
  // Three dense layers (each fused with its activation): the first two are cut (the first
  // computes no input gradient; the second applies the first's gelu to its own), the last is not.
  using Net = nn::Sequential<nn::Input<600>, nn::Linear<512>, nn::GELU, nn::Linear<600>, nn::ReLU, nn::Linear<7>>;
  using P = typename etnn::Model<Net, T>::program;
  constexpr auto blocks0 = P::template layer<0>::weight_row_blocks;
  constexpr auto blocks1 = P::template layer<1>::weight_row_blocks;
  static_assert(blocks0.count == 2 && blocks1.count == 2);
  constexpr int rows = 37;
  etnn::Tensor<T, etnn::Shape<600>> x(rows);
  etnn::test::fill_uniform(x.data(), x.size(), 11, 2.0);
  auto backward = [&](bool row_blocks, std::vector<std::size_t>& reported) {
    etnn::Model<Net, T> model(3);
    std::fill_n(model.gradients(), Net::flat_size, T(0.25));  // what Gradients::add adds to
    etnn::nn::TrainingPass<etnn::Model<Net, T>> pass(model);
    const auto out = pass.forward(x);
    etnn::test::fill_uniform(out.gradient, std::size_t{rows} * 7, 12, 1.0);
    pass.backward(T(1), [&](std::size_t first) { reported.push_back(first); }, gradients, row_blocks);
    return std::vector<T>(model.gradients(), model.gradients() + Net::flat_size);
  };
  std::vector<std::size_t> whole, blocked;
  const std::vector<T> g_whole = backward(false, whole), g_blocked = backward(true, blocked);
  CHECK(std::memcmp(g_whole.data(), g_blocked.data(), g_whole.size() * sizeof(T)) == 0);
  CHECK(whole == std::vector<std::size_t>{P::param_offset[2], P::param_offset[1], 0});
  const std::size_t w1 = P::param_offset[1];
  CHECK(blocked == std::vector<std::size_t>{P::param_offset[2], w1 + blocks1.begin(2), w1 + blocks1.begin(1), w1, w1,
                                            blocks0.begin(2), blocks0.begin(1), 0, 0});
}
}  // namespace

TEST_CASE("row blocks of a large weight's gradient: the same bits, reported from the last block down") {
  check_row_blocks<float>(etnn::nn::Gradients::overwrite);
  check_row_blocks<float>(etnn::nn::Gradients::add);
  check_row_blocks<double>(etnn::nn::Gradients::overwrite);
}
