// The CUDA backend in whole training runs: training steps, CUDA graphs, every kind of layer,
// checkpoints and the non-finite guard on the device against the same runs on the CPU; reported as
// skipped where no usable GPU is present. Part of the test_cuda binary (mixed precision is in
// test_cuda_mixed.cu).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/cuda_test_support.hpp"

using namespace cuda_test;

namespace {
using Mlp = decltype(nn::input<64> >> nn::linear<128> >> nn::relu >> nn::linear<64> >> nn::tanh >> nn::linear<10>);

enum class Rule { sgd_momentum, adam_clipped_scheduled };

// Trains the same model on both devices for `steps` steps and compares the parameters.
template <class T>
void check_training(Rule rule, int steps, double tol) {
  const int batch = 48;
  const auto x = random_values<float>(std::size_t{64} * batch * steps, 12);
  std::vector<int> y(static_cast<std::size_t>(batch) * steps);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int>((i * 7) % 10);
  auto train = [&]<class Device>(Device) {
    etnn::Model<Mlp, T, Device> model(3);
    etnn::loss::CrossEntropy ce;
    std::vector<double> losses;
    auto train_with = [&](auto& opt) {
      etnn::Trainer trainer(model, ce, opt);
      for (int s = 0; s < steps; ++s) {
        const std::size_t first = static_cast<std::size_t>(s) * batch;
        losses.push_back(trainer.step(etnn::TensorView<const float, etnn::Shape<64>>(x.data() + first * 64, batch),
                                      std::span<const int>(y).subspan(first, batch)));
      }
    };
    if (rule == Rule::sgd_momentum) {
      etnn::optim::SGD opt(model, {.lr = 0.05f, .momentum = 0.9f});
      train_with(opt);
    } else {
      etnn::optim::Adam opt(model, {.lr = 1e-3f});
      opt.set_max_grad_norm(0.5f);
      opt.set_schedule(etnn::optim::schedule::CosineWarmup{.warmup = 3, .total = 10});
      train_with(opt);
    }
    std::vector<T> params(Mlp::flat_size);
    etnn::copy_to_host(Device{}, params.data(), model.parameters(), params.size());
    return std::pair(params, losses);
  };
  const auto [cpu_params, cpu_losses] = train(etnn::Cpu{});
  const auto [cuda_params, cuda_losses] = train(etnn::Cuda{});
  CHECK(max_relative_error(cuda_params, cpu_params) <= tol);
  CHECK(max_relative_error(cuda_losses, cpu_losses) <= tol);
}
}  // namespace

TEST_CASE_TEMPLATE("training on the device follows the CPU step for step (SGD with momentum, Adam, clipping)" *
                       doctest::skip(!gpu()),
                   T, float, double) {
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-10;
  check_training<T>(Rule::sgd_momentum, 10, tol);
  check_training<T>(Rule::adam_clipped_scheduled, 10, tol);
}

TEST_CASE("CUDA graphs replay the step: the same parameters as launching every kernel" * doctest::skip(!gpu())) {
  const int batch = 32, steps = 6;
  const auto x = random_values<float>(std::size_t{64} * batch, 15);
  std::vector<int> y(batch);
  for (int i = 0; i < batch; ++i) y[static_cast<std::size_t>(i)] = i % 10;
  auto train = [&](bool graphs) {
    etnn::Model<Mlp, float, etnn::Cuda> model(4);
    etnn::loss::CrossEntropy ce;
    etnn::optim::Adam opt(model, {.lr = 1e-3f});
    etnn::Trainer trainer(model, ce, opt, {.cuda_graphs = graphs});
    for (int s = 0; s < steps; ++s) {
      // Two batch sizes in turn, the smaller first: the larger grows the workspace after the first
      // pair is recorded, which must be recorded again (not replayed into freed memory). At the
      // end: one graph pair each.
      const int b = s % 2 == 0 ? batch / 2 : batch;
      trainer.step(etnn::TensorView<const float, etnn::Shape<64>>(x.data(), b), std::span<const int>(y).first(b));
    }
    const auto& recorded = trainer.step_graphs();
    CHECK(recorded.enabled() == graphs);
    CHECK(recorded.reason() == (graphs ? "" : "turned off"));
    CHECK(recorded.recorded() == (graphs ? 4u : 0u));
    CHECK(recorded.launches() == (graphs ? 2 * steps : 0));
    std::vector<float> params(Mlp::flat_size);
    etnn::copy_to_host(etnn::Cuda{}, params.data(), model.parameters(), params.size());
    return params;
  };
  CHECK(train(true) == train(false));
}

namespace {
// Net trained on Device from seed 6 (SGD with momentum, NLL on its log-probabilities): the
// parameters, the buffers (batch norm's running statistics), the step losses, the eval-mode
// outputs after training, and why the step was not recorded as a graph ("" if it was).
template <class Net, class T, class Device>
auto train_on(const std::vector<T>& x, const std::vector<int>& labels, int batch, int steps, bool graphs) {
  using Model = etnn::Model<Net, T, Device>;
  const etnn::TensorView<const T, typename Net::input_shape> inputs(x.data(), batch);
  Model model(6);
  etnn::loss::NLL nll;
  etnn::optim::SGD opt(model, {.lr = 0.05f, .momentum = 0.9f});
  etnn::Trainer trainer(model, nll, opt, {.cuda_graphs = graphs});
  std::vector<T> losses;
  for (int s = 0; s < steps; ++s) losses.push_back(trainer.step(inputs, labels));
  // And steps in eval mode (running statistics, no dropout): graphs of their own when recorded.
  model.eval();
  for (int s = 0; s < 2; ++s) losses.push_back(trainer.step(inputs, labels));
  model.train();
  std::vector<T> params(Model::flat_size), buffers(Model::num_buffers);
  etnn::copy_to_host(Device{}, params.data(), model.parameters(), params.size());
  etnn::copy_to_host(Device{}, buffers.data(), model.buffers(), buffers.size());
  model.eval();
  const auto out = etnn::to_host(model.forward(inputs));
  std::string why_not_recorded = "a host model";
  if constexpr (std::is_same_v<Device, etnn::Cuda>) {
    const auto& graphs = trainer.step_graphs();
    why_not_recorded = graphs.reason();
    // Recorded: forward and backward in each mode, and every later step replayed them.
    if (graphs.enabled()) {
      CHECK(graphs.recorded() == 4);
      CHECK(graphs.launches() == 2 * (steps + 2));
    }
  }
  return std::tuple(params, buffers, losses, std::vector<T>(out.data(), out.data() + out.size()), why_not_recorded);
}

template <class Net, class T>
void check_network_follows_cpu(bool graphs) {
  const int batch = 24, steps = 4;
  std::vector<T> x(Net::input_shape::size * batch);
  etnn::test::fill_input<typename Net::input_shape>(x.data(), x.size(), 30);  // ids for a token input
  std::vector<int> labels(batch);
  for (int i = 0; i < batch; ++i) labels[static_cast<std::size_t>(i)] = (i * 3) % 10;
  const auto [p_cpu, b_cpu, l_cpu, o_cpu, unused] = train_on<Net, T, etnn::Cpu>(x, labels, batch, steps, graphs);
  const auto [p_gpu, b_gpu, l_gpu, o_gpu, why] = train_on<Net, T, etnn::Cuda>(x, labels, batch, steps, graphs);
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-10;
  CHECK(max_relative_error(p_gpu, p_cpu) <= tol);
  CHECK(max_relative_error(b_gpu, b_cpu) <= tol);  // running statistics, batches tracked
  CHECK(max_relative_error(l_gpu, l_cpu) <= tol);
  CHECK(max_relative_error(o_gpu, o_cpu) <= tol);  // eval mode: the running statistics
  if (!graphs)
    CHECK(why == "turned off");
  else if (nn::detail::Program<typename Net::layers>::draws_random)
    CHECK(why == "the network draws random numbers (dropout): each pass differs");
  else
    CHECK_MESSAGE(why.empty(), why);
}
}  // namespace

TEST_CASE_TEMPLATE("every kind of layer trains on the device as on the CPU: norms, dropout, softmax, combinators" *
                       doctest::skip(!gpu()),
                   T, float, double) {
  check_network_follows_cpu<EveryLayer, T>(true);   // dropout: launched every step, the same masks
  check_network_follows_cpu<Normalised, T>(true);   // recorded: batch norm's statistics stay on the device
  check_network_follows_cpu<Normalised, T>(false);  // and launched every step
}

TEST_CASE_TEMPLATE("the sequence layers train on the device as on the CPU: conv1d, attention, embeddings" *
                       doctest::skip(!gpu()),
                   T, float, double) {
  check_network_follows_cpu<SequenceLayers, T>(true);
  check_network_follows_cpu<TokenLayers, T>(true);
  check_network_follows_cpu<TokenLayers, T>(false);
}

TEST_CASE("a device model's checkpoint loads on the CPU and back, and evaluates the same" * doctest::skip(!gpu())) {
  etnn::Model<Mlp, float, etnn::Cuda> on_gpu(5);
  const auto path = std::filesystem::temp_directory_path() / "etnn_cuda_checkpoint.safetensors";
  etnn::io::save(on_gpu, path);
  etnn::Model<Mlp, float, etnn::Cpu> on_cpu(99);
  etnn::io::load(on_cpu, path);
  std::vector<float> gpu_params(Mlp::flat_size);
  etnn::copy_to_host(etnn::Cuda{}, gpu_params.data(), on_gpu.parameters(), Mlp::flat_size);
  CHECK(std::equal(gpu_params.begin(), gpu_params.end(), on_cpu.parameters()));
  etnn::Model<Mlp, float, etnn::Cuda> reloaded(7);
  etnn::io::load(reloaded, path);
  std::vector<float> reloaded_params(Mlp::flat_size);
  etnn::copy_to_host(etnn::Cuda{}, reloaded_params.data(), reloaded.parameters(), Mlp::flat_size);
  CHECK(reloaded_params == gpu_params);
  std::filesystem::remove(path);

  const int n = 500;
  auto features = random_values<float>(std::size_t{64} * n, 13);
  std::vector<int> labels(n);
  for (int i = 0; i < n; ++i) labels[static_cast<std::size_t>(i)] = i % 10;
  etnn::data::Dataset<etnn::Shape<64>> data(std::move(features), std::move(labels));
  // Logits agree to rounding, so at most a near-tie in a sample or two may go the other way.
  CHECK(std::abs(etnn::evaluate(on_gpu, data, etnn::metrics::accuracy, 128) -
                 etnn::evaluate(on_cpu, data, etnn::metrics::accuracy, 128)) <= 2.0 / n);
  const auto logits_gpu = etnn::to_host(on_gpu.forward(etnn::TensorView<const float, etnn::Shape<64>>(data.features().data(), n)));
  const auto logits_cpu = on_cpu.forward(etnn::TensorView<const float, etnn::Shape<64>>(data.features().data(), n));
  CHECK(max_relative_error<float>(std::span<const float>(logits_gpu.data(), logits_gpu.size()),
                                  std::span<const float>(logits_cpu.data(), logits_cpu.size())) <= 1e-4);
}

TEST_CASE("the non-finite guard skips a step on the device as on the CPU" * doctest::skip(!gpu())) {
  etnn::Model<Mlp, float, etnn::Cuda> model(1);
  etnn::loss::CrossEntropy ce;
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  etnn::Trainer trainer(model, ce, opt);
  auto x = random_values<float>(64 * 8, 14);
  std::vector<int> y(8, 1);
  trainer.step(etnn::TensorView<const float, etnn::Shape<64>>(x.data(), 8), y);
  std::vector<float> before(Mlp::flat_size), after(Mlp::flat_size);
  etnn::copy_to_host(etnn::Cuda{}, before.data(), model.parameters(), Mlp::flat_size);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  trainer.step(etnn::TensorView<const float, etnn::Shape<64>>(x.data(), 8), y);
  etnn::copy_to_host(etnn::Cuda{}, after.data(), model.parameters(), Mlp::flat_size);
  CHECK(trainer.skipped_steps() == 1);
  CHECK(before == after);
}

namespace {
// tanh carries a NaN in the data to the loss and every gradient.
using TanhMlp = decltype(nn::input<64> >> nn::linear<32> >> nn::tanh >> nn::linear<10>);

// Keeps the device busy for about `cycles` clock cycles, so that the host runs ahead of it.
__global__ void hold_device(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// What training Net (64 inputs) on Device under `loss`, with targets y for every batch, through a
// sequence of batches of 8 (a null one: bad, the good batch with a NaN) leaves, stopped by an
// etnn::Error (a NonFiniteError, or the loss's own) if one comes: the parameters, the optimizer's
// steps, the skipped steps and the error's message. make_optimizer(model) makes the optimizer,
// which follows `schedule`. device_behind: on the device each step is preceded by a kernel that
// holds it for about a millisecond, so that verdicts are on their way when the next steps' updates
// are launched.
struct NanRun {
  std::vector<float> params;
  std::int64_t steps, skipped;
  std::string message;
};
template <class Net, class Device, class Loss, class Targets, class MakeOptimizer>
NanRun train_through(Device, Loss& loss, const Targets& y, MakeOptimizer make_optimizer, etnn::TrainerOptions options,
                     const std::vector<bool>& bad_batches, const etnn::optim::schedule::Schedule& schedule,
                     bool device_behind) {
  const int batch = 8;
  const auto good = random_values<float>(64 * batch, 15);
  auto bad = good;
  bad[9] = std::numeric_limits<float>::quiet_NaN();
  etnn::Model<Net, float, Device> model(4);
  auto opt = make_optimizer(model);
  opt.set_schedule(schedule);
  etnn::Trainer trainer(model, loss, opt, options);
  NanRun run;
  try {
    for (const bool is_bad : bad_batches) {
      if constexpr (std::is_same_v<Device, etnn::Cuda>)
        if (device_behind) etnn::cuda::launch("hold_device", hold_device, {1, 1}, 2'000'000LL);
      (void)trainer.step(etnn::TensorView<const float, etnn::Shape<64>>((is_bad ? bad : good).data(), batch), y);
    }
  } catch (const etnn::Error& e) {
    run.message = e.what();
  }
  run.params.resize(Net::flat_size);
  etnn::copy_to_host(Device{}, run.params.data(), model.parameters(), run.params.size());
  run.steps = opt.steps();
  run.skipped = trainer.skipped_steps();
  return run;
}

// train_through TanhMlp under cross-entropy, every label 2.
template <class Device, class MakeOptimizer>
NanRun train_through_nans(Device device, MakeOptimizer make_optimizer, etnn::TrainerOptions options,
                          const std::vector<bool>& bad_batches,
                          const etnn::optim::schedule::Schedule& schedule = etnn::optim::schedule::Constant{},
                          bool device_behind = false) {
  etnn::loss::CrossEntropy ce;
  const std::vector<int> y(8, 2);
  return train_through<TanhMlp>(device, ce, y, make_optimizer, options, bad_batches, schedule, device_behind);
}
}  // namespace

TEST_CASE("steps the device skips leave Adam's count, the parameters and a run's error as the host's guard does" *
          doctest::skip(!gpu())) {
  const auto adam = [](auto& model) { return etnn::optim::Adam(model, {.lr = 1e-2f}); };
  // A run of two: on the CPU the second throws; on the device the step after it, without an update.
  const std::vector<bool> bad = {false, true, false, false, true, true, false};
  const NanRun cpu = train_through_nans(etnn::Cpu{}, adam, {.max_non_finite_in_a_row = 2}, bad);
  const NanRun cuda = train_through_nans(etnn::Cuda{}, adam, {.max_non_finite_in_a_row = 2}, bad);
  CHECK(cpu.steps == 3);
  CHECK(cuda.steps == 3);
  CHECK(cpu.skipped == 3);
  CHECK(cuda.skipped == 3);
  CHECK(!cuda.message.empty());
  CHECK(cuda.message == cpu.message);
  CHECK(max_relative_error(cuda.params, cpu.params) <= 1e-4);
}

TEST_CASE("a device behind the host picks each update's step number and lr from the verdicts on their way, as the CPU counts" *
          doctest::skip(!gpu())) {
  // Up to three verdicts on their way (the host waits for the oldest beyond that); a new lr every
  // step, so a wrong pick moves the parameters; skipped steps alone, in pairs and after an update.
  const auto adam = [](auto& model) { return etnn::optim::Adam(model, {.lr = 1e-2f}); };
  const etnn::optim::schedule::Schedule decay = etnn::optim::schedule::StepDecay{.step_size = 1, .gamma = 0.8};
  const std::vector<bool> bad = {false, true, false, true, true, false, false, true, false, false, false, true};
  const NanRun cpu = train_through_nans(etnn::Cpu{}, adam, {}, bad, decay);
  const NanRun cuda = train_through_nans(etnn::Cuda{}, adam, {}, bad, decay, true);
  CHECK(cpu.message.empty());
  CHECK(cuda.message.empty());
  CHECK(cpu.steps == 7);
  CHECK(cuda.steps == 7);
  CHECK(cpu.skipped == 5);
  CHECK(cuda.skipped == 5);
  CHECK(max_relative_error(cuda.params, cpu.params) <= 1e-4);
  // SGD with momentum: its first step is an update of its own kind, waited for.
  const auto sgd = [](auto& model) { return etnn::optim::SGD(model, {.lr = 0.1f, .momentum = 0.9f}); };
  const std::vector<bool> first_skipped = {true, false, false, true, false, false};
  const NanRun sgd_cpu = train_through_nans(etnn::Cpu{}, sgd, {}, first_skipped, decay);
  const NanRun sgd_cuda = train_through_nans(etnn::Cuda{}, sgd, {}, first_skipped, decay, true);
  CHECK(sgd_cuda.steps == sgd_cpu.steps);
  CHECK(sgd_cuda.skipped == 2);
  CHECK(max_relative_error(sgd_cuda.params, sgd_cpu.params) <= 1e-4);
}

TEST_CASE("BCE's input check stays on a device behind the host: the bad batch's error comes some steps later, the parameters as the CPU's check leaves them" *
          doctest::skip(!gpu())) {
  // The NaN (sample 0's input 9) reaches all of sample 0's probabilities: element 0 is the first
  // outside [0, 1].
  // On the CPU the bad batch throws before its backward; on the device the steps after it skip
  // until the host reads its verdict, and the next step throws.
  using SigmoidMlp = decltype(nn::input<64> >> nn::linear<32> >> nn::tanh >> nn::linear<10> >> nn::sigmoid);
  std::vector<float> hot(80);
  for (std::size_t i = 0; i < hot.size(); ++i) hot[i] = i % 3 == 0 ? 1.0f : 0.0f;
  const etnn::TensorView<const float, etnn::Shape<10>> y(hot.data(), 8);
  const auto adam = [](auto& model) { return etnn::optim::Adam(model, {.lr = 1e-2f}); };
  const std::vector<bool> bad = {false, false, true, false, false, false, false};
  const etnn::optim::schedule::Schedule constant = etnn::optim::schedule::Constant{};
  etnn::loss::BCE bce;
  const NanRun cpu = train_through<SigmoidMlp>(etnn::Cpu{}, bce, y, adam, {}, bad, constant, false);
  const NanRun cuda = train_through<SigmoidMlp>(etnn::Cuda{}, bce, y, adam, {}, bad, constant, true);
  for (const NanRun* run : {&cpu, &cuda}) {
    CHECK(run->message.find("input element 0 is") != std::string::npos);
    CHECK(run->message.find("BCE takes probabilities in [0, 1]") != std::string::npos);
    CHECK(run->steps == 2);
    CHECK(run->skipped == 0);
  }
  CHECK(max_relative_error(cuda.params, cpu.params) <= 1e-4);
}

TEST_CASE("with gradient accumulation a micro-batch's non-finite loss skips the window on the device as on the CPU" *
          doctest::skip(!gpu())) {
  // The NaN sits in a micro-batch before each window's last, so only the window's verdict on the
  // device (or the host's check of each loss) can see its loss. Two skipped windows in a row: on
  // the CPU the second's last call throws; on the device the next window's first, before its forward.
  const auto sgd = [](auto& model) { return etnn::optim::SGD(model, {.lr = 0.1f, .momentum = 0.9f}); };
  const std::vector<bool> bad = {false, false, true, false, true, false, false, false};
  const etnn::TrainerOptions options{.accumulate = 2, .max_non_finite_in_a_row = 2};
  const NanRun cpu = train_through_nans(etnn::Cpu{}, sgd, options, bad);
  const NanRun cuda = train_through_nans(etnn::Cuda{}, sgd, options, bad);
  CHECK(cpu.steps == 1);
  CHECK(cuda.steps == 1);
  CHECK(cpu.skipped == 2);
  CHECK(cuda.skipped == 2);
  CHECK(cuda.message.find("the loss was non-finite on 1 of 1 rank") != std::string::npos);
  CHECK(cuda.message == cpu.message);
  CHECK(max_relative_error(cuda.params, cpu.params) <= 1e-4);
}
