// The Trainer's non-finite guard: a NaN or an infinity in a gradient or the loss skips the update
// (parameters, optimizer state and buffers bitwise unchanged), is counted, and a run of them ends
// in an error naming the tensor. The data-parallel side is in tests/dist/test_mpi.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "support/gradcheck.hpp"

namespace nn = etnn::nn;

namespace {

using Net = decltype(nn::input<8> >> nn::linear<16> >> nn::relu >> nn::linear<3>);
// tanh carries a NaN back into every gradient (relu keeps NaN forward, but its backward is a select:
// 0 wherever the output is not > 0, NaN included).
using TanhNet = decltype(nn::input<8> >> nn::linear<16> >> nn::tanh >> nn::linear<3>);
using BnNet = decltype(nn::input<8> >> nn::linear<16> >> nn::batch_norm >> nn::tanh >> nn::linear<3>);
constexpr float not_a_number = std::numeric_limits<float>::quiet_NaN();
constexpr int batch = 12;

struct Batch {
  std::vector<float> x;
  std::vector<int> y;
  etnn::TensorView<const float, etnn::Shape<8>> view() const { return {x.data(), batch}; }
};

Batch random_batch(std::uint64_t seed) {
  Batch b{std::vector<float>(batch * 8), std::vector<int>(batch)};
  etnn::test::fill_uniform(b.x.data(), b.x.size(), seed);
  for (int i = 0; i < batch; ++i) b.y[static_cast<std::size_t>(i)] = i % 3;
  return b;
}

Batch nan_batch(std::uint64_t seed) {
  Batch b = random_batch(seed);
  b.x[5] = not_a_number;  // one feature of one sample
  return b;
}

std::size_t offset_of(const std::string& name) {
  for (const auto& p : etnn::Model<Net>::named_parameters())
    if (p.name == name) return p.offset;
  FAIL("no parameter ", name);
  return 0;
}

template <class T>
bool same_bits(const std::vector<T>& a, const T* b) {
  return std::memcmp(a.data(), b, a.size() * sizeof(T)) == 0;
}

// One update of accumulate = 2 whose gradient gets a NaN at `offset` between its micro-batches.
template <class Trainer>
float step_with_nan_gradient(Trainer& trainer, std::size_t offset, std::uint64_t seed) {
  REQUIRE(trainer.options().accumulate == 2);
  const Batch a = random_batch(seed), b = random_batch(seed + 1);
  trainer.step(a.view(), a.y);
  trainer.model().gradients()[offset] = not_a_number;
  return trainer.step(b.view(), b.y);
}

// A cross-entropy whose value is infinite (its gradient is cross-entropy's, finite) while `infinite`.
struct InfiniteLoss : etnn::loss::CrossEntropy {
  bool infinite = false;
  template <class View>
  float value_and_grad(etnn::Cpu device, View output, std::span<const int> labels, float* grad) const {
    const float v = CrossEntropy::value_and_grad(device, output, labels, grad);
    return infinite ? std::numeric_limits<float>::infinity() : v;
  }
};

}  // namespace

TEST_CASE("a NaN in a gradient skips the update: parameters, Adam's state and step count unchanged, counted") {
  etnn::Model<Net> model(1);
  etnn::loss::CrossEntropy loss;
  etnn::optim::Adam opt(model, {.lr = 1e-2f});
  etnn::Trainer trainer(model, loss, opt, {.accumulate = 2});
  CHECK(trainer.options().skip_non_finite);  // on by default
  CHECK(trainer.options().max_non_finite_in_a_row == 3);
  for (std::uint64_t s = 0; s < 6; ++s) {  // three updates: moments and a step count to keep
    const Batch b = random_batch(s);
    trainer.step(b.view(), b.y);
  }
  REQUIRE(opt.steps() == 3);
  const std::vector<float> params(model.parameters(), model.parameters() + Net::flat_size);
  const std::vector<float> state(opt.state(), opt.state() + opt.state_size());

  step_with_nan_gradient(trainer, offset_of("0.weight") + 17, 10);
  CHECK(same_bits(params, model.parameters()));
  CHECK(same_bits(state, opt.state()));
  CHECK(opt.steps() == 3);
  CHECK(trainer.skipped_steps() == 1);
  CHECK(trainer.non_finite_in_a_row() == 1);
  CHECK(trainer.micro_step() == 0);  // the window ended

  // The next window starts from zeroed gradients and updates.
  const Batch a = random_batch(14), b = random_batch(15);
  trainer.step(a.view(), a.y);
  CHECK(std::isfinite(trainer.step(b.view(), b.y)));
  CHECK(trainer.skipped_steps() == 1);
  CHECK(trainer.non_finite_in_a_row() == 0);  // a finite step ends the run
  CHECK(opt.steps() == 4);
  CHECK(!same_bits(params, model.parameters()));
  for (std::size_t i = 0; i < Net::flat_size; ++i) REQUIRE(std::isfinite(model.parameters()[i]));
}

TEST_CASE("a NaN in the data: the loss is NaN, the step skipped, batch norm's running statistics restored") {
  etnn::Model<BnNet> model(2);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.1f, .momentum = 0.9f});
  etnn::Trainer trainer(model, loss, opt);
  const Batch good = random_batch(3);
  trainer.step(good.view(), good.y);
  const std::vector<float> params(model.parameters(), model.parameters() + BnNet::flat_size);
  const std::vector<float> state(opt.state(), opt.state() + opt.state_size());
  const std::vector<float> buffers(model.buffers(), model.buffers() + etnn::Model<BnNet>::num_buffers);
  const Batch bad = nan_batch(4);
  CHECK(std::isnan(trainer.step(bad.view(), bad.y)));  // the step still reports its loss
  CHECK(same_bits(params, model.parameters()));
  CHECK(same_bits(state, opt.state()));
  CHECK(same_bits(buffers, model.buffers()));  // the forward pass had made them NaN
  CHECK(opt.steps() == 1);
  CHECK(trainer.skipped_steps() == 1);
  trainer.step(good.view(), good.y);
  CHECK(opt.steps() == 2);
  for (std::size_t i = 0; i < etnn::Model<BnNet>::num_buffers; ++i) REQUIRE(std::isfinite(model.buffers()[i]));
}

TEST_CASE("N non-finite steps in a row throw etnn::NonFiniteError naming the first tensor backward made non-finite") {
  SUBCASE("a NaN in one tensor's gradient") {
    etnn::Model<Net> model(1);
    etnn::loss::CrossEntropy loss;
    etnn::optim::SGD opt(model, {.lr = 0.1f});
    etnn::Trainer trainer(model, loss, opt, {.accumulate = 2, .max_non_finite_in_a_row = 3});
    const std::vector<float> params(model.parameters(), model.parameters() + Net::flat_size);
    step_with_nan_gradient(trainer, offset_of("0.bias") + 3, 1);
    step_with_nan_gradient(trainer, offset_of("0.bias"), 3);
    CHECK_THROWS_WITH_AS(step_with_nan_gradient(trainer, offset_of("0.bias"), 5),
                         doctest::Contains("3 steps in a row with non-finite gradients (each skipped: the parameters "
                                           "are those before the first); first non-finite: '0.bias'"),
                         etnn::NonFiniteError);
    CHECK(same_bits(params, model.parameters()));
    CHECK(trainer.skipped_steps() == 3);
    CHECK(trainer.non_finite_in_a_row() == 0);  // the error ends the run: training may go on
    CHECK(opt.steps() == 0);
  }
  SUBCASE("a NaN in the data: every gradient is NaN, the layer nearest the output is named") {
    etnn::Model<TanhNet> model(1);
    etnn::loss::CrossEntropy loss;
    etnn::optim::SGD opt(model, {.lr = 0.1f});
    etnn::Trainer trainer(model, loss, opt, {.max_non_finite_in_a_row = 2});
    const Batch bad = nan_batch(1);
    trainer.step(bad.view(), bad.y);
    try {
      trainer.step(bad.view(), bad.y);
      FAIL("no error after 2 non-finite steps in a row");
    } catch (const etnn::NonFiniteError& e) {
      const std::string what = e.what();
      INFO(what);
      CHECK(what.find("etnn::Trainer: 2 steps in a row with non-finite gradients") == 0);
      CHECK(what.find("first non-finite: '2.weight'") != std::string::npos);
      CHECK(what.find("the loss was non-finite on 1 of 1 rank") != std::string::npos);
      CHECK(what.find("max_non_finite_in_a_row") != std::string::npos);
    }
  }
  SUBCASE("a non-finite loss with finite gradients") {
    etnn::Model<Net> model(1);
    InfiniteLoss loss;
    etnn::optim::SGD opt(model, {.lr = 0.1f});
    etnn::Trainer trainer(model, loss, opt, {.max_non_finite_in_a_row = 1});
    const Batch b = random_batch(1);
    trainer.step(b.view(), b.y);
    CHECK(opt.steps() == 1);
    loss.infinite = true;
    const std::vector<float> params(model.parameters(), model.parameters() + Net::flat_size);
    CHECK_THROWS_WITH_AS(trainer.step(b.view(), b.y),
                         doctest::Contains("1 steps in a row with non-finite losses (each skipped: the parameters are "
                                           "those before the first); first non-finite: the loss (the gradients were "
                                           "finite); the loss was non-finite on 1 of 1 rank"),
                         etnn::NonFiniteError);
    CHECK(same_bits(params, model.parameters()));
    CHECK(opt.steps() == 1);
  }
}

TEST_CASE("a finite step between non-finite ones resets the run") {
  etnn::Model<Net> model(1);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  etnn::Trainer trainer(model, loss, opt, {.max_non_finite_in_a_row = 3});
  const Batch bad = nan_batch(1), good = random_batch(2);
  trainer.step(bad.view(), bad.y);
  trainer.step(bad.view(), bad.y);
  CHECK(trainer.non_finite_in_a_row() == 2);
  trainer.step(good.view(), good.y);
  CHECK(trainer.non_finite_in_a_row() == 0);
  trainer.step(bad.view(), bad.y);
  trainer.step(bad.view(), bad.y);
  CHECK(trainer.skipped_steps() == 4);
  CHECK(opt.steps() == 1);
  CHECK_THROWS_AS(trainer.step(bad.view(), bad.y), etnn::NonFiniteError);
  CHECK(trainer.skipped_steps() == 5);
}

TEST_CASE("a parametric loss's gradients are guarded too, and both optimizers skip together") {
  etnn::Model<decltype(nn::input<8> >> nn::linear<16> >> nn::relu >> nn::linear<4>)> model(0);
  etnn::loss::ArcFace<4, 3> arcface({.scale = 16, .margin = 0.3f}, 0);
  etnn::optim::Adam opt(model, {.lr = 1e-2f});
  etnn::optim::Adam head_opt(arcface, {.lr = 1e-2f});
  etnn::Trainer trainer(model, arcface, opt, head_opt, {.accumulate = 2, .max_non_finite_in_a_row = 1});
  const Batch a = random_batch(1), b = random_batch(2);
  trainer.step(a.view(), a.y);
  trainer.step(b.view(), b.y);
  const std::vector<float> params(model.parameters(), model.parameters() + decltype(model)::flat_size);
  const std::vector<float> head(arcface.parameters(), arcface.parameters() + arcface.flat_size);
  const std::vector<float> head_state(head_opt.state(), head_opt.state() + head_opt.state_size());
  trainer.step(a.view(), a.y);
  arcface.gradients()[5] = not_a_number;
  CHECK_THROWS_WITH_AS(trainer.step(b.view(), b.y), doctest::Contains("first non-finite: 'loss.weight'"),
                       etnn::NonFiniteError);
  CHECK(same_bits(params, model.parameters()));
  CHECK(same_bits(head, arcface.parameters()));
  CHECK(same_bits(head_state, head_opt.state()));
  CHECK(opt.steps() == 1);
  CHECK(head_opt.steps() == 1);
}

TEST_CASE("the guard's options: off trains on the NaN, 0 never throws, a negative limit is rejected") {
  const Batch bad = nan_batch(1);
  {
    etnn::Model<Net> model(1);
    etnn::loss::CrossEntropy loss;
    etnn::optim::SGD opt(model, {.lr = 0.1f});
    etnn::Trainer trainer(model, loss, opt, {.skip_non_finite = false});
    trainer.step(bad.view(), bad.y);
    CHECK(opt.steps() == 1);
    CHECK(trainer.skipped_steps() == 0);
    CHECK(std::isnan(model.parameters()[5]));  // 0.weight[0][5]: the NaN feature's column
  }
  {
    etnn::Model<Net> model(1);
    etnn::loss::CrossEntropy loss;
    etnn::optim::SGD opt(model, {.lr = 0.1f});
    etnn::Trainer trainer(model, loss, opt, {.max_non_finite_in_a_row = 0});
    for (int i = 0; i < 10; ++i) trainer.step(bad.view(), bad.y);
    CHECK(trainer.skipped_steps() == 10);
    CHECK(trainer.non_finite_in_a_row() == 10);
    CHECK(opt.steps() == 0);
  }
  etnn::Model<Net> model(1);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  CHECK_THROWS_WITH_AS(etnn::Trainer(model, loss, opt, {.max_non_finite_in_a_row = -1}),
                       doctest::Contains("max_non_finite_in_a_row must be >= 0"), etnn::Error);
}

TEST_CASE("the guard's scan finds the last non-finite value whatever the thread count") {
  std::vector<double> g(100000, 1.0);
  CHECK(etnn::backend::last_non_finite(etnn::Cpu{}, g.data(), g.size()) == g.size());
  g[70001] = -std::numeric_limits<double>::infinity();
  g[3] = std::numeric_limits<double>::quiet_NaN();
  g[99999] = std::numeric_limits<double>::max();  // finite
  const int saved = etnn::num_threads();
  for (const int threads : {1, 2, 3}) {
    etnn::set_num_threads(threads);
    CHECK(etnn::backend::last_non_finite(etnn::Cpu{}, g.data(), g.size()) == 70001);
  }
  etnn::set_num_threads(saved);
  CHECK(etnn::backend::last_non_finite(etnn::Cpu{}, g.data(), 0) == 0);
  CHECK(etnn::backend::first_non_finite(etnn::Cpu{}, g.data(), 0, g.size()) == 3);
}

TEST_CASE("the guard's scan tells every finite float from NaN and infinity of either sign") {
  using limits = std::numeric_limits<float>;
  std::vector<float> g = {0.0f, -0.0f, limits::max(), -limits::max(), limits::denorm_min(), -limits::min(), 1e-30f};
  g.resize(37, 2.5f);  // past a vector width, with a remainder
  CHECK(etnn::backend::last_non_finite(etnn::Cpu{}, g.data(), g.size()) == g.size());
  for (const float bad : {limits::infinity(), -limits::infinity(), limits::quiet_NaN(), -limits::quiet_NaN(),
                          limits::signaling_NaN()}) {
    for (const std::size_t at : {std::size_t{0}, std::size_t{17}, g.size() - 1}) {
      std::vector<float> h = g;
      h[at] = bad;
      CHECK(etnn::backend::last_non_finite(etnn::Cpu{}, h.data(), h.size()) == at);
    }
  }
}

namespace {
// What cuda::StepVerdict keeps of gradients on the device, computed here as its kernel does: for
// each tensor in flat order, the first non-finite index from its offset to the next tensor's (the
// zeros that align tensors included).
struct RecordedVerdict {
  std::vector<std::optional<std::size_t>> firsts;
  std::size_t tensors() const { return firsts.size(); }
  std::optional<std::size_t> first_non_finite(std::size_t p) const { return firsts[p]; }
};

template <class Model>
RecordedVerdict record(const float* gradients) {
  const auto& tensors = etnn::optim::tensors_in_flat_order<Model>();
  RecordedVerdict verdict{std::vector<std::optional<std::size_t>>(tensors.size())};
  for (std::size_t i = 0; i < Model::flat_size; ++i) {
    if (std::isfinite(gradients[i])) continue;
    std::size_t p = 0;
    while (p + 1 < tensors.size() && tensors[p + 1].offset <= i) ++p;
    if (!verdict.firsts[p] || i < *verdict.firsts[p]) verdict.firsts[p] = i;
  }
  return verdict;
}
}  // namespace

TEST_CASE("the device's per-tensor verdict names the same tensor as the host's scan, wherever the NaNs are") {
  using Model = etnn::Model<BnNet>;
  Model model(1);
  float* g = model.gradients();
  std::mt19937_64 random(11);
  std::uniform_int_distribution<std::size_t> anywhere(0, Model::flat_size - 1);
  CHECK(etnn::train::detail::non_finite_tensor_of<Model>(record<Model>(g)).empty());
  for (int trial = 0; trial < 300; ++trial) {
    std::fill(g, g + Model::flat_size, 0.5f);
    const int count = 1 + trial % 4;
    for (int k = 0; k < count; ++k) g[anywhere(random)] = k % 2 ? not_a_number : -std::numeric_limits<float>::infinity();
    const std::string host = etnn::train::detail::non_finite_tensor<Model>(g);
    INFO("trial " << trial);
    CHECK(!host.empty());
    CHECK(etnn::train::detail::non_finite_tensor_of<Model>(record<Model>(g)) == host);
  }
}
