// Mixed precision on the device against the fp32 CPU model: bf16 and fp16, through the fully
// fused kernels (padded widths too) and layer by layer through cuBLASLt, and fp16's loss scaling;
// reported as skipped where no usable GPU is present. Part of the test_cuda binary.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <span>
#include <vector>

#include "cuda/cuda_test_support.hpp"

using namespace cuda_test;

namespace {
using Narrow = decltype(nn::input<32> >> nn::linear<64> >> nn::relu >> nn::linear<64> >> nn::relu >> nn::linear<16>);
// Input 20 and output 10 run padded to 32 and 16, the hidden 48 to 64 (expr/fused_mlp_padding.hpp).
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
  std::vector<float> p_mixed(Net::flat_size);
  etnn::copy_to_host(etnn::Cuda{}, p_mixed.data(), mixed.parameters(), p_mixed.size());
  CHECK(max_relative_error<float>(std::span<const float>(p_mixed),
                                  std::span<const float>(reference.parameters(), Net::flat_size)) <=
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

TEST_CASE("mixed precision with tanh and SiLU fused (SiLU's f'(z) kept in bf16 or fp16) follows the CPU model" *
          doctest::skip(!gpu())) {
  check_mixed_follows_cpu<decltype(nn::input<32> >> nn::linear<64> >> nn::tanh >> nn::linear<64> >> nn::tanh >>
                                   nn::linear<16>)>();
  check_mixed_follows_cpu<decltype(nn::input<20> >> nn::linear<48> >> nn::silu >> nn::linear<10>)>();
  check_mixed_follows_cpu<decltype(nn::input<32> >> nn::linear<64> >> nn::silu >> nn::linear<16>), etnn::fp16>();
  check_mixed_follows_cpu<decltype(nn::input<32> >> nn::linear<64> >> nn::tanh >> nn::linear<16>), etnn::fp16>();
}

TEST_CASE("mixed precision split: a wide first layer through cuBLASLt, the narrow tail fused, follows the CPU model" *
          doctest::skip(!gpu())) {
  check_mixed_follows_cpu<decltype(nn::input<784> >> nn::linear<64> >> nn::relu >> nn::linear<64> >> nn::relu >>
                                   nn::linear<10>)>();
  check_mixed_follows_cpu<decltype(nn::input<300> >> nn::linear<48> >> nn::gelu >> nn::linear<64> >> nn::silu >>
                                   nn::linear<10>),
                          etnn::fp16>();
  // The tail's input padded (100 run as 128): dL/dx comes back through the padded columns, dropped.
  check_mixed_follows_cpu<decltype(nn::input<784> >> nn::linear<100> >> nn::relu >> nn::linear<10>)>();
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
  etnn::copy_from_host(etnn::Cuda{}, mixed.parameters(), reference.parameters(), Narrow::flat_size);
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
  std::vector<float> gradients(Narrow::flat_size);
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
