// The CUDA backend in whole training runs: training steps, CUDA graphs, mixed precision, every
// kind of layer, checkpoints and the non-finite guard on the device against the same runs on the
// CPU; reported as skipped where no usable GPU is present. Part of the test_cuda binary.
#include <algorithm>
#include <cmath>
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
    std::vector<T> params(Mlp::num_params);
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
    std::vector<float> params(Mlp::num_params);
    etnn::copy_to_host(etnn::Cuda{}, params.data(), model.parameters(), params.size());
    return params;
  };
  CHECK(train(true) == train(false));
}

namespace {
using Narrow = decltype(nn::input<32> >> nn::linear<64> >> nn::relu >> nn::linear<64> >> nn::relu >> nn::linear<16>);
// Input 20 and output 10 run padded to 32 and 16, the hidden 48 to 64 (nn/fused_mlp_padding.hpp).
using Padded = decltype(nn::input<20> >> nn::linear<48> >> nn::relu >> nn::linear<10>);

// Not fusable (input 784, a tanh): etnn::bf16 and etnn::fp16 run it layer by layer, products
// through cuBLASLt.
using Unfusable = decltype(nn::input<784> >> nn::linear<256> >> nn::relu >> nn::linear<64> >> nn::tanh >>
                           nn::linear<10>);

// The mixed-precision model of Net (Mixed: etnn::bf16, etnn::fp16 or their _unfused forms) against
// the fp32 CPU model from the same initial parameters: outputs, 5 Adam steps of MSE (fp16 with its
// loss scaled, no step overflowing), graphs recorded, and a checkpoint that loads into the CPU model.
// The bounds are bf16's; fp16's 3 more mantissa bits land well inside them.
template <class Net, class Mixed = etnn::bf16>
void check_mixed_follows_cpu() {
  constexpr int in = Net::input_shape::size, out = Net::output_shape::size;
  const int batch = 300, steps = 5;
  const auto x = random_values<float>(std::size_t{in} * batch, 16);
  const auto t = random_values<float>(std::size_t{out} * batch, 17);
  const etnn::TensorView<const float, etnn::Shape<in>> xv(x.data(), batch);
  const etnn::TensorView<const float, etnn::Shape<out>> tv(t.data(), batch);
  etnn::Model<Net, Mixed, etnn::Cuda> mixed(8);
  etnn::Model<Net, float, etnn::Cpu> reference(8);
  // Same initial parameters (fp32 in both), outputs within bf16 rounding.
  const auto out_mixed = etnn::to_host(mixed.forward(xv));
  const auto out_ref = reference.forward(xv);
  double worst = 0, largest = 0;
  for (std::size_t i = 0; i < out_ref.size(); ++i) {
    worst = std::max(worst, std::abs(double(out_mixed.data()[i]) - double(out_ref.data()[i])));
    largest = std::max(largest, std::abs(double(out_ref.data()[i])));
  }
  CHECK(worst <= 2e-2 * std::max(1.0, largest));
  // Training: the losses agree to bf16 rounding, and the parameters stay close. Adam moves every
  // parameter by about lr per step whatever its gradient's size, so where a gradient is near zero
  // and its bf16 value has the other sign the parameter moves the other way: at most 2 lr per step
  // (seen on an H200: 5.5e-3 after 5 steps).
  etnn::loss::MSE mse;
  etnn::optim::Adam opt_mixed(mixed, {.lr = 1e-3f});
  etnn::optim::Adam opt_ref(reference, {.lr = 1e-3f});
  etnn::Trainer train_mixed(mixed, mse, opt_mixed);
  etnn::Trainer train_ref(reference, mse, opt_ref);
  for (int s = 0; s < steps; ++s) {
    const float l_mixed = train_mixed.step(xv, tv), l_ref = train_ref.step(xv, tv);
    CHECK(std::abs(l_mixed - l_ref) <= 2e-2 * l_ref);
  }
  CHECK(train_mixed.skipped_steps() == 0);
  CHECK(train_mixed.loss_scale() == (etnn::loss_scaled_by_default<Mixed> ? 65536.0f : 1.0f));
  std::vector<float> p_mixed(Net::num_params);
  etnn::copy_to_host(etnn::Cuda{}, p_mixed.data(), mixed.parameters(), p_mixed.size());
  CHECK(max_relative_error<float>(std::span<const float>(p_mixed),
                                  std::span<const float>(reference.parameters(), Net::num_params)) <=
        2 * 1e-3 * steps);
  const auto& graphs = train_mixed.step_graphs();
  CHECK_MESSAGE(graphs.enabled(), graphs.reason());
  CHECK(graphs.recorded() == 2);
  // Its checkpoint is fp32 and loads into the float model exactly.
  const auto path = std::filesystem::temp_directory_path() / "etnn_mixed_checkpoint.safetensors";
  etnn::io::save(mixed, path);
  etnn::io::load(reference, path);
  std::filesystem::remove(path);
  CHECK(std::equal(p_mixed.begin(), p_mixed.end(), reference.parameters()));
}
}  // namespace

TEST_CASE("mixed precision: the fused bf16 model follows the fp32 CPU model within bf16 rounding" *
          doctest::skip(!gpu())) {
  check_mixed_follows_cpu<Narrow>();
}

TEST_CASE("mixed precision with padded widths (20 -> 48 -> 10 run as 32 -> 64 -> 16) follows the CPU model too" *
          doctest::skip(!gpu())) {
  check_mixed_follows_cpu<Padded>();
}

TEST_CASE("mixed precision layer by layer (cuBLASLt bf16 products) follows the CPU model: any network, or forced" *
          doctest::skip(!gpu())) {
  check_mixed_follows_cpu<Unfusable>();
  check_mixed_follows_cpu<Narrow, etnn::bf16_unfused>();
}

TEST_CASE("fp16 mixed precision, fused and layer by layer, follows the CPU model with its loss scaled" *
          doctest::skip(!gpu())) {
  check_mixed_follows_cpu<Narrow, etnn::fp16>();
  check_mixed_follows_cpu<Padded, etnn::fp16>();
  check_mixed_follows_cpu<Unfusable, etnn::fp16>();
  check_mixed_follows_cpu<Narrow, etnn::fp16_unfused>();
}

namespace {
// One training step of an fp16 model whose last layer's weights are scaled by 1e-4: the gradients
// reaching the hidden layers (dZ = dy W, about 5e-9) are below half fp16's smallest subnormal, so
// unscaled 16-bit products flush them to zero, while the default loss scale (2^16) lifts them into
// fp16's normal range. Returns the first layer's weight gradient (unscaled after the step) relative
// to the fp32 CPU model's: |g - g_cpu| / |g_cpu|.
template <class Mixed>
double first_layer_error(bool loss_scaling) {
  constexpr int in = Narrow::input_shape::size, out = Narrow::output_shape::size;
  const int batch = 256;
  const auto x = random_values<float>(std::size_t{in} * batch, 31);
  const etnn::TensorView<const float, etnn::Shape<in>> xv(x.data(), batch);
  etnn::Model<Narrow, float, etnn::Cpu> reference(9);
  const auto named = etnn::Model<Narrow>::named_parameters();
  const auto& last_weight = named[named.size() - 2];  // "4.weight"
  for (std::size_t i = 0; i < last_weight.numel; ++i) reference.parameters()[last_weight.offset + i] *= 1e-4f;
  etnn::Model<Narrow, Mixed, etnn::Cuda> mixed(9);
  etnn::copy_from_host(etnn::Cuda{}, mixed.parameters(), reference.parameters(), Narrow::num_params);
  // L1 against targets 1 below the outputs: dL/dy = 1 / (batch out) everywhere, on both devices.
  const auto y = reference.forward(xv);
  std::vector<float> t(y.data(), y.data() + y.size());
  for (float& v : t) v -= 1.0f;
  const etnn::TensorView<const float, etnn::Shape<out>> tv(t.data(), batch);
  etnn::loss::L1 l1;
  etnn::optim::SGD opt_ref(reference, {.lr = 1.0f});
  etnn::optim::SGD opt_mixed(mixed, {.lr = 1.0f});
  etnn::Trainer train_ref(reference, l1, opt_ref);
  etnn::Trainer train_mixed(mixed, l1, opt_mixed, {.loss_scaling = etnn::LossScaling{.enabled = loss_scaling}});
  train_ref.step(xv, tv);
  train_mixed.step(xv, tv);
  REQUIRE(train_mixed.skipped_steps() == 0);
  std::vector<float> gradients(Narrow::num_params);
  etnn::copy_to_host(etnn::Cuda{}, gradients.data(), mixed.gradients(), gradients.size());
  const auto& first = named.front();  // "0.weight"
  double difference = 0, norm = 0;
  for (std::size_t i = first.offset; i < first.offset + first.numel; ++i) {
    const double g_ref = reference.gradients()[i];
    difference += (gradients[i] - g_ref) * (gradients[i] - g_ref);
    norm += g_ref * g_ref;
  }
  REQUIRE(norm > 0);
  return std::sqrt(difference / norm);
}
}  // namespace

TEST_CASE("fp16: loss scaling keeps the gradients that unscaled fp16 products flush to zero" * doctest::skip(!gpu())) {
  for (const bool scaled : {true, false}) {
    const double fused = first_layer_error<etnn::fp16>(scaled);
    const double per_layer = first_layer_error<etnn::fp16_unfused>(scaled);
    INFO("loss scaling ", scaled, ": fused ", fused, ", per layer ", per_layer);
    if (scaled) {  // fp16 roundings, and the odd ReLU mask that a rounding flips
      CHECK(fused <= 0.05);
      CHECK(per_layer <= 0.05);
    } else {  // most of the first layer's gradient is lost
      CHECK(fused >= 0.5);
      CHECK(per_layer >= 0.5);
    }
  }
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
  std::vector<T> params(Model::num_params), buffers(Model::num_buffers);
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
  const auto x = random_values<T>(Net::input_shape::size * batch, 30);
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

TEST_CASE("a device model's checkpoint loads on the CPU and back, and evaluates the same" * doctest::skip(!gpu())) {
  etnn::Model<Mlp, float, etnn::Cuda> on_gpu(5);
  const auto path = std::filesystem::temp_directory_path() / "etnn_cuda_checkpoint.safetensors";
  etnn::io::save(on_gpu, path);
  etnn::Model<Mlp, float, etnn::Cpu> on_cpu(99);
  etnn::io::load(on_cpu, path);
  std::vector<float> gpu_params(Mlp::num_params);
  etnn::copy_to_host(etnn::Cuda{}, gpu_params.data(), on_gpu.parameters(), Mlp::num_params);
  CHECK(std::equal(gpu_params.begin(), gpu_params.end(), on_cpu.parameters()));
  etnn::Model<Mlp, float, etnn::Cuda> reloaded(7);
  etnn::io::load(reloaded, path);
  std::vector<float> reloaded_params(Mlp::num_params);
  etnn::copy_to_host(etnn::Cuda{}, reloaded_params.data(), reloaded.parameters(), Mlp::num_params);
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
  std::vector<float> before(Mlp::num_params), after(Mlp::num_params);
  etnn::copy_to_host(etnn::Cuda{}, before.data(), model.parameters(), Mlp::num_params);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  trainer.step(etnn::TensorView<const float, etnn::Shape<64>>(x.data(), 8), y);
  etnn::copy_to_host(etnn::Cuda{}, after.data(), model.parameters(), Mlp::num_params);
  CHECK(trainer.skipped_steps() == 1);
  CHECK(before == after);
}
