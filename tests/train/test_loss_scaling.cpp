// Dynamic loss scaling (TrainerOptions::loss_scaling, torch.cuda.amp.GradScaler's rules), on the
// CPU, where it is the same host logic as on the device: scaling by powers of two trains bitwise as
// unscaled training; an overflow skips the step and backs the scale off without counting as a
// non-finite run; the scale grows after growth_interval updates; training states keep it.
// The fp16 models it is on by default for are checked on a GPU (tests/cuda/test_cuda_training.cu).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "support/gradcheck.hpp"

namespace nn = etnn::nn;

namespace {

using Net = decltype(nn::input<8> >> nn::linear<16> >> nn::relu >> nn::linear<16> >> nn::tanh >> nn::linear<3>);
// Without a saturating activation, large inputs make large gradients.
using ReluNet = decltype(nn::input<8> >> nn::linear<16> >> nn::relu >> nn::linear<3>);
constexpr int batch = 12;

template <class T>
struct Batch {
  std::vector<T> x;
  std::vector<int> y;
  etnn::TensorView<const T, etnn::Shape<8>> view() const { return {x.data(), batch}; }
};

template <class T>
Batch<T> random_batch(std::uint64_t seed, double scale = 1.0) {
  Batch<T> b{std::vector<T>(batch * 8), std::vector<int>(batch)};
  etnn::test::fill_uniform(b.x.data(), b.x.size(), seed, scale);
  for (int i = 0; i < batch; ++i) b.y[static_cast<std::size_t>(i)] = static_cast<int>((i + seed) % 3);
  return b;
}

template <class T>
bool same_bits(const T* a, const T* b, std::size_t n) {
  return std::memcmp(a, b, n * sizeof(T)) == 0;
}

template <class Model>
std::vector<typename Model::value_type> parameters_of(const Model& model) {
  return {model.parameters(), model.parameters() + Model::flat_size};
}

}  // namespace

TEST_CASE_TEMPLATE("loss scaling by powers of two trains bitwise as unscaled training, growing its scale", T, float,
                   double) {
  for (int accumulate : {1, 2}) {
    INFO("accumulate ", accumulate);
    etnn::Model<Net, T> plain_model(3), scaled_model(3);
    etnn::loss::CrossEntropy loss;
    etnn::optim::Adam plain_opt(plain_model, {.lr = 1e-2f}), scaled_opt(scaled_model, {.lr = 1e-2f});
    etnn::Trainer plain(plain_model, loss, plain_opt, {.accumulate = accumulate});
    etnn::Trainer scaled(scaled_model, loss, scaled_opt,
                         {.accumulate = accumulate,
                          .loss_scaling = etnn::LossScaling{.init_scale = 1024.0f, .growth_interval = 3}});
    CHECK(plain.loss_scale() == 1.0f);  // off by default for float and double models
    CHECK(!plain.options().loss_scaling->enabled);
    CHECK(scaled.loss_scale() == 1024.0f);
    for (std::uint64_t s = 0; s < 14; ++s) {
      const auto b = random_batch<T>(s);
      const T want = plain.step(b.view(), b.y);
      const T got = scaled.step(b.view(), b.y);
      CHECK(got == want);  // the reported loss is never scaled
      REQUIRE(same_bits(plain_model.parameters(), scaled_model.parameters(), Net::flat_size));
    }
    // 14 micro-steps: 14 / accumulate updates, the scale doubled after every 3 of them.
    const int updates = 14 / accumulate;
    CHECK(scaled.loss_scale() == 1024.0f * static_cast<float>(1 << (updates / 3)));
    CHECK(scaled.updates_at_loss_scale() == updates % 3);
    CHECK(scaled.skipped_steps() == 0);
  }
}

TEST_CASE("gradients that overflow skip the step and back the scale off; the first update equals an unscaled one") {
  // Inputs up to 1000 and dL/doutput times 2^127 overflow float in backward's products.
  const float huge = std::ldexp(1.0f, 127);
  constexpr double input_scale = 1000.0;
  etnn::Model<ReluNet> model(5);
  etnn::loss::CrossEntropy loss;
  etnn::optim::Adam opt(model, {.lr = 1e-2f});
  etnn::Trainer trainer(model, loss, opt,
                        {.max_non_finite_in_a_row = 2, .loss_scaling = etnn::LossScaling{.init_scale = huge}});
  const auto initial = parameters_of(model);
  std::uint64_t seed = 0;
  float scale = huge;
  while (opt.steps() == 0) {
    REQUIRE(seed < 40);  // never more than a few dozen halvings
    const auto b = random_batch<float>(seed++, input_scale);
    CHECK(std::isfinite(trainer.step(b.view(), b.y)));  // the loss itself stays finite
    if (opt.steps() == 0) {
      CHECK(same_bits(initial.data(), model.parameters(), ReluNet::flat_size));  // skipped: nothing moved
      CHECK(trainer.loss_scale() == scale * 0.5f);
      CHECK(trainer.non_finite_in_a_row() == 0);  // overflows are not a non-finite run
      scale *= 0.5f;
    }
  }
  // More overflows than max_non_finite_in_a_row, none of them an error.
  CHECK(trainer.skipped_steps() == static_cast<std::int64_t>(seed - 1));
  CHECK(trainer.skipped_steps() > 2);
  CHECK(trainer.loss_scale() == scale);  // the step that updated kept it
  CHECK(trainer.updates_at_loss_scale() == 1);
  // The update of batch seed - 1 at a scale that fits is the unscaled first step on it.
  etnn::Model<ReluNet> reference_model(5);
  etnn::optim::Adam reference_opt(reference_model, {.lr = 1e-2f});
  etnn::Trainer reference(reference_model, loss, reference_opt);
  const auto b = random_batch<float>(seed - 1, input_scale);
  reference.step(b.view(), b.y);
  CHECK(same_bits(reference_model.parameters(), model.parameters(), ReluNet::flat_size));
}

TEST_CASE("with loss scaling, a non-finite loss is still a non-finite run: the scale stays, the run ends in the error") {
  etnn::Model<Net> model(1);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  etnn::Trainer trainer(model, loss, opt,
                        {.max_non_finite_in_a_row = 2, .loss_scaling = etnn::LossScaling{.init_scale = 256.0f}});
  auto bad = random_batch<float>(2);
  bad.x[3] = std::numeric_limits<float>::quiet_NaN();  // tanh carries it to the loss
  CHECK(std::isnan(trainer.step(bad.view(), bad.y)));
  CHECK(trainer.non_finite_in_a_row() == 1);
  CHECK(trainer.loss_scale() == 256.0f);  // not an overflow: lowering the scale would not help
  CHECK_THROWS_AS(trainer.step(bad.view(), bad.y), etnn::NonFiniteError);
  CHECK(opt.steps() == 0);
}

TEST_CASE("a parametric loss's gradients are scaled and unscaled with the model's: bitwise as unscaled") {
  using EmbeddingNet = decltype(nn::input<8> >> nn::linear<16> >> nn::relu >> nn::linear<4>);
  const auto b = random_batch<float>(4);
  const auto run = [&](bool scaled) {
    etnn::Model<EmbeddingNet> model(0);
    etnn::loss::ArcFace<4, 3> arcface({.scale = 16, .margin = 0.3f}, 0);
    etnn::optim::Adam opt(model, {.lr = 1e-2f});
    etnn::optim::SGD head_opt(arcface, {.lr = 0.5f});
    etnn::Trainer trainer(model, arcface, opt, head_opt,
                          {.accumulate = 2, .loss_scaling = etnn::LossScaling{.enabled = scaled, .init_scale = 4096.0f}});
    for (int s = 0; s < 8; ++s) trainer.step(b.view(), b.y);
    std::vector<float> all = parameters_of(model);
    all.insert(all.end(), arcface.parameters(), arcface.parameters() + arcface.flat_size);
    all.insert(all.end(), arcface.gradients(), arcface.gradients() + arcface.flat_size);  // unscaled after a step
    return all;
  };
  const auto plain = run(false), scaled = run(true);
  CHECK(same_bits(plain.data(), scaled.data(), plain.size()));
}

TEST_CASE("loss scaling's options are checked when the trainer is made") {
  etnn::Model<Net> model(1);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  const auto rejects = [&](etnn::LossScaling scaling, bool guard, const char* message) {
    CHECK_THROWS_WITH_AS(etnn::Trainer(model, loss, opt, {.skip_non_finite = guard, .loss_scaling = scaling}),
                         doctest::Contains(message), etnn::Error);
  };
  rejects({.init_scale = 0.0f}, true, "init_scale must be finite and > 0");
  rejects({.init_scale = std::numeric_limits<float>::infinity()}, true, "init_scale must be finite and > 0");
  rejects({.growth_factor = 1.0f}, true, "growth_factor must be finite and > 1");
  rejects({.backoff_factor = 1.0f}, true, "backoff_factor must be in (0, 1)");
  rejects({.growth_interval = 0}, true, "growth_interval must be >= 1");
  rejects({}, false, "needs the non-finite guard");
  // Off: any factors, and no guard needed.
  etnn::Trainer off(model, loss, opt, {.skip_non_finite = false, .loss_scaling = etnn::LossScaling{.enabled = false}});
  CHECK(off.loss_scale() == 1.0f);
}

TEST_CASE("a training state keeps the loss scale; a scaled state does not load into an unscaled trainer") {
  namespace fs = std::filesystem;
  std::vector<float> x(96 * 8);
  std::vector<int> y(96);
  etnn::test::fill_uniform(x.data(), x.size(), 9);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int>(i % 3);
  const etnn::data::Dataset<etnn::Shape<8>> data(std::move(x), std::move(y));
  const fs::path path = fs::temp_directory_path() / ("etnn-loss-scale-" + std::to_string(::getpid()) + ".safetensors");
  const etnn::LossScaling scaling{.init_scale = 64.0f, .growth_interval = 4};

  etnn::Model<Net> model(1);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  etnn::Trainer trainer(model, loss, opt, {.loss_scaling = scaling});
  etnn::data::DataLoader loader(data, {.batch = 16});
  int steps = 0;
  for (auto b : loader) {
    trainer.step(b);
    if (++steps == 5) break;
  }
  REQUIRE(trainer.loss_scale() == 128.0f);
  REQUIRE(trainer.updates_at_loss_scale() == 1);
  etnn::io::save_state(trainer, loader, path);

  etnn::Model<Net> resumed_model(2);
  etnn::optim::SGD resumed_opt(resumed_model, {.lr = 0.1f});
  etnn::Trainer resumed(resumed_model, loss, resumed_opt, {.loss_scaling = scaling});
  etnn::data::DataLoader resumed_loader(data, {.batch = 16});
  etnn::io::load_state(resumed, resumed_loader, path);
  CHECK(resumed.loss_scale() == 128.0f);
  CHECK(resumed.updates_at_loss_scale() == 1);

  // Into a trainer without loss scaling: an error, nothing loaded.
  etnn::Model<Net> plain_model(3);
  etnn::optim::SGD plain_opt(plain_model, {.lr = 0.1f});
  etnn::Trainer plain(plain_model, loss, plain_opt);
  const auto before = parameters_of(plain_model);
  CHECK_THROWS_WITH_AS(etnn::io::load_state(plain, resumed_loader, path),
                       doctest::Contains("turn TrainerOptions::loss_scaling on"), etnn::IoError);
  CHECK(same_bits(before.data(), plain_model.parameters(), Net::flat_size));

  // A load that fails later (another optimizer's state) leaves the scale as it was.
  etnn::Model<Net> adam_model(4);
  etnn::optim::Adam adam(adam_model, {.lr = 0.1f});
  etnn::Trainer adam_trainer(adam_model, loss, adam, {.loss_scaling = scaling});
  CHECK_THROWS_AS(etnn::io::load_state(adam_trainer, resumed_loader, path), etnn::IoError);
  CHECK(adam_trainer.loss_scale() == 64.0f);
  CHECK(adam_trainer.updates_at_loss_scale() == 0);

  // A state saved without loss scaling: a scaled trainer keeps its own scale.
  etnn::io::save_state(plain, resumed_loader, path);
  CHECK(!etnn::io::read_safetensors(path).metadata.contains("loss_scale"));
  etnn::io::load_state(resumed, resumed_loader, path);
  CHECK(resumed.loss_scale() == 128.0f);
  fs::remove(path);
}
