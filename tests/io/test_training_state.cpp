// Training states: 100 uninterrupted steps equal 37 (or 50) steps, save, fresh objects, load,
// and the rest, bit for bit; with momentum, mid-epoch and at an epoch's end, and inside a
// gradient-accumulation window.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "support/gradcheck.hpp"
#include "support/training.hpp"

namespace fs = std::filesystem;
namespace nn = etnn::nn;

namespace {

using Net = decltype(nn::input<12> >> nn::linear<16> >> nn::tanh >> nn::linear<16> >> nn::gelu >> nn::linear<4>);

etnn::data::Dataset<etnn::Shape<12>> dataset() {
  std::vector<float> x(1600 * 12);
  std::vector<int> y(1600);
  etnn::test::fill_uniform(x.data(), x.size(), 5);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int>((i * 7) % 4);
  return {std::move(x), std::move(y)};
}

// Trains (micro-)steps [first, last) of a run with batches of 32 (50 per epoch); resumes from
// `resume` when given and saves the state to `save` at the end when given. Returns the parameters.
std::vector<float> train(const etnn::data::Dataset<etnn::Shape<12>>& data, int accumulate, int first, int last,
                         const std::optional<fs::path>& resume, const std::optional<fs::path>& save) {
  etnn::Model<Net> model(1);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.05f, .momentum = 0.9f, .nesterov = true});
  etnn::Trainer trainer(model, loss, opt, {.accumulate = accumulate});
  etnn::data::DataLoader loader(data, {.batch = 32, .shuffle = true, .seed = 11});
  if (resume) etnn::io::load_state(trainer, loader, *resume);
  etnn::test::run_steps(trainer, loader, first, last);
  if (save) etnn::io::save_state(trainer, loader, *save);
  return {model.parameters(), model.parameters() + Net::flat_size};
}

struct TempFile {
  fs::path path = fs::temp_directory_path() / ("etnn-state-" + std::to_string(::getpid()) + ".safetensors");
  ~TempFile() { fs::remove(path); }
};

}  // namespace

TEST_CASE("resuming from a training state gives bitwise the uninterrupted run") {
  const auto data = dataset();
  for (int accumulate : {1, 3}) {
    const auto uninterrupted = train(data, accumulate, 0, 100, std::nullopt, std::nullopt);
    for (int stop : {37, 50}) {  // mid-epoch (and mid-window for accumulate 3), and at an epoch's end
      TempFile state;
      train(data, accumulate, 0, stop, std::nullopt, state.path);
      const auto resumed = train(data, accumulate, stop, 100, state.path, std::nullopt);
      INFO("accumulate ", accumulate, ", stopped after ", stop);
      CHECK(std::memcmp(uninterrupted.data(), resumed.data(), resumed.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("AdamW with a schedule and clipping resumes to bitwise the uninterrupted run") {
  const auto data = dataset();
  // Steps [first, last) of a run with AdamW (amsgrad), warm-up and cosine decay, and clipping.
  const auto adam_train = [&](int first, int last, const std::optional<fs::path>& resume,
                              const std::optional<fs::path>& save) {
    etnn::Model<Net> model(1);
    etnn::loss::CrossEntropy loss;
    etnn::optim::AdamW opt(model, {.lr = 3e-3f, .amsgrad = true});
    opt.set_schedule(etnn::optim::schedule::CosineWarmup{.warmup = 10, .total = 100, .min_lr = 1e-4});
    opt.set_max_grad_norm(0.5f);
    etnn::Trainer trainer(model, loss, opt);
    etnn::data::DataLoader loader(data, {.batch = 32, .shuffle = true, .seed = 11});
    if (resume) etnn::io::load_state(trainer, loader, *resume);
    etnn::test::run_steps(trainer, loader, first, last);
    if (save) etnn::io::save_state(trainer, loader, *save);
    return std::vector<float>(model.parameters(), model.parameters() + Net::flat_size);
  };
  const auto uninterrupted = adam_train(0, 100, std::nullopt, std::nullopt);
  for (int stop : {5, 37}) {  // in the warm-up; in the decay and mid-epoch
    INFO("stopped after ", stop);
    TempFile state;
    adam_train(0, stop, std::nullopt, state.path);
    const auto file = etnn::io::read_safetensors(state.path);
    CHECK(file.metadata.at("optimizer_steps") == std::to_string(stop));
    for (const char* name :
         {"optimizer.exp_avg.0.weight", "optimizer.exp_avg_sq.2.bias", "optimizer.max_exp_avg_sq.4.weight"})
      CHECK_MESSAGE(file.find(name) != nullptr, name);
    const auto resumed = adam_train(stop, 100, state.path, std::nullopt);
    CHECK(std::memcmp(uninterrupted.data(), resumed.data(), resumed.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("a training state is refused where it does not fit") {
  const auto data = dataset();
  TempFile weights;
  etnn::Model<Net> model(1);
  etnn::io::save(model, weights.path);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.05f, .momentum = 0.9f});
  etnn::Trainer trainer(model, loss, opt);
  etnn::data::DataLoader loader(data, {.batch = 32});
  CHECK_THROWS_WITH_AS(etnn::io::load_state(trainer, loader, weights.path),
                       doctest::Contains("not an etnn training state"), etnn::IoError);

  TempFile state;
  etnn::io::save_state(trainer, loader, state.path);
  etnn::optim::SGD plain(model, {.lr = 0.05f});  // no momentum: no momentum_buffer expected
  etnn::Trainer plain_trainer(model, loss, plain);
  CHECK_THROWS_WITH_AS(etnn::io::load_state(plain_trainer, loader, state.path),
                       doctest::Contains("unexpected tensor 'optimizer.momentum_buffer.0.weight'"), etnn::IoError);
  // The state's model checkpoint part still loads as weights.
  const auto file = etnn::io::read_safetensors(state.path);
  CHECK(file.metadata.at("format") == "etnn-training-state");
  CHECK(file.metadata.at("ranks") == "1");

  // Another network with the same tensors (relu for tanh): refused, unless allowed.
  using Relu = decltype(nn::input<12> >> nn::linear<16> >> nn::relu >> nn::linear<16> >> nn::gelu >> nn::linear<4>);
  etnn::Model<Relu> relu(2);
  etnn::optim::SGD relu_opt(relu, {.lr = 0.05f, .momentum = 0.9f});
  etnn::Trainer relu_trainer(relu, loss, relu_opt);
  CHECK_THROWS_WITH_AS(etnn::io::load_state(relu_trainer, loader, state.path),
                       doctest::Contains(("etnn::io::load_state: '" + state.path.string() +
                                          "': saved from the network 'input<12> >> linear<16> >> tanh >> linear<16> "
                                          ">> gelu >> linear<4>' but the model is 'input<12> >> linear<16> >> relu "
                                          ">> linear<16> >> gelu >> linear<4>'; load it into the network it was "
                                          "saved from, or pass {.allow_architecture_mismatch = true}")
                                             .c_str()),
                       etnn::IoError);
  etnn::io::load_state(relu_trainer, loader, state.path, {.allow_architecture_mismatch = true});
  CHECK(std::equal(model.parameters(), model.parameters() + Net::flat_size, relu.parameters()));
}

TEST_CASE("the loader's position is right whenever the state is saved") {
  const auto data = dataset();  // 50 batches of 32
  etnn::Model<Net> model(1);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.05f});
  etnn::Trainer trainer(model, loss, opt);
  etnn::data::DataLoader loader(data, {.batch = 32, .shuffle = true});
  loader.set_epoch(0);
  for (auto batch : loader) trainer.step(batch);
  CHECK(loader.position() == 50);
  loader.set_epoch(1);  // the next epoch chosen, not started: nothing of it consumed
  CHECK(loader.position() == 0);
  TempFile state;
  etnn::io::save_state(trainer, loader, state.path);
  etnn::data::DataLoader fresh(data, {.batch = 32, .shuffle = true});
  etnn::io::load_state(trainer, fresh, state.path);
  CHECK(fresh.epoch() == 1);
  CHECK(fresh.position() == 0);
  // Saved right after loading a mid-epoch state, before iterating: the same position.
  int steps = 0;
  fresh.set_epoch(1);
  for (auto batch : fresh) {
    trainer.step(batch);
    if (++steps == 7) break;
  }
  etnn::io::save_state(trainer, fresh, state.path);
  etnn::data::DataLoader again(data, {.batch = 32, .shuffle = true});
  etnn::io::load_state(trainer, again, state.path);
  CHECK(again.epoch() == 1);
  CHECK(again.position() == 7);
  TempFile resaved;
  etnn::io::save_state(trainer, again, resaved.path);
  CHECK(etnn::io::read_safetensors(resaved.path).metadata.at("position") == "7");
  // A different batch size changes what a position means: refused.
  etnn::data::DataLoader other(data, {.batch = 16});
  CHECK_THROWS_WITH_AS(etnn::io::load_state(trainer, other, state.path), doctest::Contains("batches_per_epoch was 50"),
                       etnn::IoError);
}

namespace {

// Regression with outlier targets of 1e30: their squared error overflows float, so the loss is
// infinite while every gradient stays finite (about 1e29 at most). Only the loss tells the guard
// to skip, so a resumed run that forgot it would update with those gradients. Batches of 32 in
// order (50 per epoch): the outliers sit in batches 36 and 37.
using Regressor = decltype(nn::input<12> >> nn::linear<16> >> nn::tanh >> nn::linear<4>);
using NormedRegressor = decltype(nn::input<12> >> nn::linear<16> >> nn::batch_norm >> nn::tanh >> nn::linear<4>);
using RegressionData = etnn::data::Dataset<etnn::Shape<12>, etnn::Shape<4>>;

RegressionData outlier_regression() {
  std::vector<float> x(1600 * 12), t(1600 * 4);
  etnn::test::fill_uniform(x.data(), x.size(), 5);
  etnn::test::fill_uniform(t.data(), t.size(), 6);
  t[(36 * 32 + 5) * 4 + 1] = 1e30f;
  t[(37 * 32 + 20) * 4 + 3] = -1e30f;
  return {std::move(x), std::move(t)};
}

struct Outcome {
  std::vector<float> parameters;
  std::vector<float> buffers;  // batch norm's running statistics
  std::int64_t skipped = 0;
  std::string error;  // the NonFiniteError's message, if one ended the run
};

// Steps [first, last) of a run (resumed from / saved to a state when given).
template <class Net>
Outcome guarded_run(const RegressionData& data, int accumulate, int max_in_a_row, int first, int last,
                    const std::optional<fs::path>& resume, const std::optional<fs::path>& save) {
  etnn::Model<Net> model(3);
  etnn::loss::MSE loss;
  etnn::optim::SGD opt(model, {.lr = 0.01f, .momentum = 0.9f});
  etnn::Trainer trainer(model, loss, opt, {.accumulate = accumulate, .max_non_finite_in_a_row = max_in_a_row});
  etnn::data::DataLoader loader(data, {.batch = 32});
  if (resume) etnn::io::load_state(trainer, loader, *resume);
  Outcome outcome;
  try {
    etnn::test::run_steps(trainer, loader, first, last);
  } catch (const etnn::NonFiniteError& e) {
    outcome.error = e.what();
  }
  if (save) etnn::io::save_state(trainer, loader, *save);
  outcome.parameters.assign(model.parameters(), model.parameters() + Net::flat_size);
  outcome.buffers.assign(model.buffers(), model.buffers() + etnn::Model<Net>::num_buffers);
  outcome.skipped = trainer.skipped_steps();
  return outcome;
}

void check_same(const Outcome& a, const Outcome& b) {
  CHECK(std::memcmp(a.parameters.data(), b.parameters.data(), a.parameters.size() * sizeof(float)) == 0);
  CHECK(a.buffers == b.buffers);
  CHECK(a.skipped == b.skipped);
  CHECK(a.error == b.error);
}

}  // namespace

TEST_CASE("the non-finite guard's counts and a window's non-finite loss resume as uninterrupted") {
  const RegressionData data = outlier_regression();
  const auto run = [&](auto... args) { return guarded_run<Regressor>(data, args...); };

  SUBCASE("saved inside a window whose first micro-batch had an infinite loss") {
    // accumulate 3: micro-batches 36, 37, 38 form a window; saved after 38 steps, inside it, so
    // that only the flag can skip the rest of the window (batch 38 is clean).
    const Outcome uninterrupted = run(3, 3, 0, 60, std::nullopt, std::nullopt);
    CHECK(uninterrupted.skipped == 1);
    TempFile state;
    run(3, 3, 0, 38, std::nullopt, state.path);
    CHECK(etnn::io::read_safetensors(state.path).metadata.at("window_loss_non_finite") == "1");
    check_same(uninterrupted, run(3, 3, 38, 60, state.path, std::nullopt));
    // Saved between windows, after the skipped one: no window in progress, no flag.
    TempFile between;
    run(3, 3, 0, 39, std::nullopt, between.path);
    CHECK(etnn::io::read_safetensors(between.path).metadata.at("window_loss_non_finite") == "0");
  }
  SUBCASE("saved inside a run of skipped steps, which ends in the error after resuming") {
    const Outcome uninterrupted = run(1, 2, 0, 60, std::nullopt, std::nullopt);
    CHECK_MESSAGE(uninterrupted.error.find("2 steps in a row with non-finite losses") != std::string::npos,
                  uninterrupted.error);
    TempFile state;
    const Outcome first = run(1, 2, 0, 37, std::nullopt, state.path);
    CHECK(first.skipped == 1);
    const auto file = etnn::io::read_safetensors(state.path);
    CHECK(file.metadata.at("skipped_steps") == "1");
    CHECK(file.metadata.at("non_finite_in_a_row") == "1");
    check_same(uninterrupted, run(1, 2, 37, 60, state.path, std::nullopt));
  }
  SUBCASE("a loaded state replaces the flag of a window in progress") {
    // A trainer inside a window whose loss was infinite loads a state saved at a clean point of
    // another window: that window's update goes through, as in the run that saved it.
    TempFile state;
    run(3, 3, 0, 34, std::nullopt, state.path);  // micro step 1 of the window 33, 34, 35
    const Outcome uninterrupted = run(3, 3, 0, 36, std::nullopt, std::nullopt);
    etnn::Model<Regressor> model(3);
    etnn::loss::MSE loss;
    etnn::optim::SGD opt(model, {.lr = 0.01f, .momentum = 0.9f});
    etnn::Trainer trainer(model, loss, opt, {.accumulate = 3});
    etnn::data::DataLoader loader(data, {.batch = 32});
    etnn::test::run_steps(trainer, loader, 0, 37);  // step 36: the window's first micro-batch, infinite
    REQUIRE(trainer.micro_step() == 1);
    etnn::io::load_state(trainer, loader, state.path);
    etnn::test::run_steps(trainer, loader, 34, 36);
    CHECK(std::memcmp(uninterrupted.parameters.data(), model.parameters(),
                      uninterrupted.parameters.size() * sizeof(float)) == 0);
    CHECK(trainer.skipped_steps() == 0);
    // A guard state no run reaches is refused, and leaves the trainer's as it was.
    etnn::train::GuardState impossible;
    impossible.skipped_steps = 1;
    impossible.non_finite_in_a_row = 2;
    CHECK_THROWS_WITH_AS(trainer.restore_guard_state(impossible),
                         doctest::Contains("1 skipped steps, 2 of them the latest in a row"), etnn::Error);
    CHECK(trainer.guard_state().skipped_steps == 0);
  }
}

TEST_CASE("a skipped window resumed from a state puts batch norm's statistics back as uninterrupted") {
  // accumulate 3: the window of batches 36, 37 and 38 is skipped for its infinite losses, and its
  // forward passes' running statistics are put back to the window's start. Saved after 38 steps,
  // inside that window, the state keeps them as window_start.<buffer>.
  const RegressionData data = outlier_regression();
  const auto run = [&](auto... args) { return guarded_run<NormedRegressor>(data, args...); };
  const Outcome uninterrupted = run(3, 3, 0, 60, std::nullopt, std::nullopt);
  CHECK(uninterrupted.skipped == 1);
  TempFile state;
  run(3, 3, 0, 38, std::nullopt, state.path);
  const auto file = etnn::io::read_safetensors(state.path);
  CHECK(file.metadata.at("window_start_buffers") == "1");
  CHECK(file.find("window_start.1.running_mean") != nullptr);
  check_same(uninterrupted, run(3, 3, 38, 60, state.path, std::nullopt));
  // At an accumulation boundary nothing is kept.
  TempFile between;
  run(3, 3, 0, 39, std::nullopt, between.path);
  CHECK(etnn::io::read_safetensors(between.path).metadata.at("window_start_buffers") == "0");
  CHECK(etnn::io::read_safetensors(between.path).find("window_start.1.running_mean") == nullptr);

  // A state missing a window-start tensor is refused, and the trainer it was loaded into, inside a
  // window of its own, keeps that window's copy and everything else as they were.
  TempFile broken;
  std::vector<etnn::io::TensorBytes> tensors;
  for (const auto& t : file.tensors)
    if (t.name != "window_start.1.running_var")
      tensors.push_back({t.name, t.dtype, t.shape, std::span(file.data).subspan(t.begin, t.end - t.begin)});
  etnn::io::write_safetensors(broken.path, tensors, file.metadata);
  etnn::Model<NormedRegressor> model(3);
  etnn::loss::MSE loss;
  etnn::optim::SGD opt(model, {.lr = 0.01f, .momentum = 0.9f});
  etnn::Trainer trainer(model, loss, opt, {.accumulate = 3});
  etnn::data::DataLoader loader(data, {.batch = 32});
  etnn::test::run_steps(trainer, loader, 0, 37);  // micro step 1 of the window 36, 37, 38
  constexpr std::size_t buffers = etnn::Model<NormedRegressor>::num_buffers;
  const std::vector<float> window_start(trainer.window_start_buffers(), trainer.window_start_buffers() + buffers);
  const std::vector<float> parameters(model.parameters(), model.parameters() + NormedRegressor::flat_size);
  const std::vector<float> running(model.buffers(), model.buffers() + buffers);
  CHECK_THROWS_WITH_AS(etnn::io::load_state(trainer, loader, broken.path),
                       doctest::Contains("window_start.1.running_var"), etnn::IoError);
  CHECK(std::equal(window_start.begin(), window_start.end(), trainer.window_start_buffers()));
  CHECK(std::equal(parameters.begin(), parameters.end(), model.parameters()));
  CHECK(std::equal(running.begin(), running.end(), model.buffers()));
  CHECK(trainer.micro_step() == 1);
  CHECK(trainer.guard_state().window_start_buffers);
  CHECK(trainer.guard_state().window_loss_non_finite);
}
