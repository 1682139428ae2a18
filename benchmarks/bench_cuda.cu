// Training throughput on the GPU, and the fused optimizer's bandwidth, for the side-by-side with
// PyTorch on the same GPU (benchmarks/peers/pytorch_gpu.py; scripts/gpu-check.sh runs both).
//   bench_cuda [--seconds S]
// Models (one step: forward, loss, backward, update; data already on the device; warm-up excluded):
//   mlp784   784-512-10 ReLU, cross-entropy, SGD lr 0.01           batch 64 and 4096
//   mlp64x4  64 -> 4 x (64, ReLU) -> 16, MSE, Adam lr 1e-3         batch 2^14 and 2^18
// each with the step recorded into CUDA graphs and without (every kernel launched); mlp64x4 also as
// etnn::Model<Net, etnn::bf16, Cuda>, which runs the fully fused kernels (bf16 tensor cores, fp32
// master weights and Adam), modes fused_bf16_graphs and fused_bf16_eager, and, with graphs, as
// etnn::bf16_unfused (the same mixed precision layer by layer through cuBLASLt, mode
// bf16_graphs), which mlp784 in bf16 takes too (it is not fusable). The same in fp16
// (etnn::fp16, its loss scaled by the Trainer): modes fused_fp16_graphs and fp16_graphs. Then Adam over
// one flat buffer of 2^26 parameters, in GB/s (p, g, m, v read; p, m, v written: 28 bytes per
// parameter), against a device-to-device copy of 256 MiB (read + write) in the same run.
// Prints one line per measurement:
//   result library=etnn device=cuda model=M batch=B mode=graphs samples_per_s=S step_ms=T steps=N
//          graphs_held=G graph_launches=L graphs_off="why the step was not recorded, or empty"
// Exits 77 (skipped) where no usable GPU is present.
#include <etnn/etnn.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace nn = etnn::nn;

namespace {

using Mlp784 = decltype(nn::input<784> >> nn::linear<512> >> nn::relu >> nn::linear<10>);
using Mlp64x4 = decltype(nn::input<64> >> nn::linear<64> >> nn::relu >> nn::linear<64> >> nn::relu >>
                         nn::linear<64> >> nn::relu >> nn::linear<64> >> nn::relu >> nn::linear<16>);

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Runs step() for warm-up (3 steps and 0.2 s), then for `seconds`; returns {steps, elapsed}.
template <class Step>
std::pair<long, double> time_steps(double seconds, Step&& step) {
  auto start = Clock::now();
  for (int i = 0; i < 3 || seconds_since(start) < 0.2; ++i) step();
  etnn::cuda::synchronize();
  long steps = 0;
  start = Clock::now();
  do {
    step();
    ++steps;
  } while (seconds_since(start) < seconds);
  etnn::cuda::synchronize();
  return {steps, seconds_since(start)};
}

template <class T>
etnn::Buffer<T, etnn::Cuda> on_device(const std::vector<T>& host) {
  etnn::Buffer<T, etnn::Cuda> b(host.size());
  etnn::copy_from_host(etnn::Cuda{}, b.data(), host.data(), host.size());
  return b;
}

std::vector<float> uniform(std::size_t n, std::uint64_t seed) {
  etnn::Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.uniform(-1, 1));
  return v;
}

// One training result, with what the trainer's graph cache did: graphs held and replays (0 and 0
// when the step ran eagerly), and why it did not record when it did not ("" when it did, or
// "off" for an eager mode asked for).
template <class Trainer>
void report(const char* model, int batch, const char* mode, long steps, double elapsed, const Trainer& trainer) {
  const auto& graphs = trainer.step_graphs();
  const std::string why = graphs.enabled() ? "" : graphs.reason();
  std::printf("result library=etnn device=cuda model=%s batch=%d mode=%s samples_per_s=%.1f step_ms=%.4f steps=%ld "
              "graphs_held=%zu graph_launches=%lld graphs_off=\"%s\"\n",
              model, batch, mode, static_cast<double>(steps) * batch / elapsed, 1e3 * elapsed / steps, steps,
              graphs.recorded(), static_cast<long long>(graphs.launches()), why.c_str());
  std::fflush(stdout);
}

// A run's mode: graphs or eager, after "fused_bf16_" (the fully fused kernels) or "bf16_"
// (cuBLASLt bf16 products layer by layer) for a mixed-precision model, fp16 likewise.
template <class Net, class Scalar>
std::string mode_name(bool graphs) {
  using Program = typename etnn::Model<Net, Scalar, etnn::Cuda>::program;
  std::string mode = graphs ? "graphs" : "eager";
  if constexpr (etnn::mixed_precision<Scalar>) {
    mode.insert(0, etnn::products_of<Scalar> == etnn::Products::fp16 ? "fp16_" : "bf16_");
    if (!std::is_same_v<Program, nn::detail::Program<typename Net::layers>>) mode.insert(0, "fused_");
  }
  return mode;
}

template <class Scalar>
void mlp784(int batch, bool graphs, double seconds) {
  etnn::Model<Mlp784, Scalar, etnn::Cuda> model(0);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.01f});
  etnn::Trainer trainer(model, loss, opt, {.cuda_graphs = graphs});
  const auto x = on_device(uniform(std::size_t{784} * batch, 1));
  std::vector<int> y(static_cast<std::size_t>(batch));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int>(i % 10);
  const etnn::TensorView<const float, etnn::Shape<784>, etnn::Cuda> xv(x.data(), batch);
  const auto [steps, elapsed] = time_steps(seconds, [&] { trainer.step(xv, y); });
  report("mlp784", batch, mode_name<Mlp784, Scalar>(graphs).c_str(), steps, elapsed, trainer);
}

template <class Scalar>
void mlp64x4(int batch, bool graphs, double seconds) {
  etnn::Model<Mlp64x4, Scalar, etnn::Cuda> model(0);
  etnn::loss::MSE loss;
  etnn::optim::Adam opt(model, {.lr = 1e-3f});
  etnn::Trainer trainer(model, loss, opt, {.cuda_graphs = graphs});
  const auto x = on_device(uniform(std::size_t{64} * batch, 2));
  const auto t = on_device(uniform(std::size_t{16} * batch, 3));
  const etnn::TensorView<const float, etnn::Shape<64>, etnn::Cuda> xv(x.data(), batch);
  const etnn::TensorView<const float, etnn::Shape<16>, etnn::Cuda> tv(t.data(), batch);
  const auto [steps, elapsed] = time_steps(seconds, [&] { trainer.step(xv, tv); });
  report("mlp64x4", batch, mode_name<Mlp64x4, Scalar>(graphs).c_str(), steps, elapsed, trainer);
}

// Adam's fused update over 2^26 parameters against a device-to-device copy.
void optimizer_bandwidth(double seconds) {
  using Flat = decltype(nn::input<8192> >> nn::linear<8191>);  // 8191 * 8193 parameters, 2^26 flat values
  constexpr double n = static_cast<double>(Flat::flat_size);
  etnn::Model<Flat, float, etnn::Cuda> model(0);
  etnn::fill(etnn::Cuda{}, model.gradients(), Flat::flat_size, 1e-3f);
  etnn::optim::Adam opt(model, {.lr = 1e-3f});
  const auto [steps, elapsed] = time_steps(seconds, [&] { opt.step(); });
  std::printf("result library=etnn device=cuda model=adam_flat n=%.0f gbps=%.1f step_ms=%.4f steps=%ld\n", n,
              28.0 * n * static_cast<double>(steps) / elapsed / 1e9, 1e3 * elapsed / steps, steps);
  const std::size_t bytes = std::size_t{256} << 20;
  etnn::Buffer<unsigned char, etnn::Cuda> from(bytes), to(bytes);
  etnn::fill(etnn::Cuda{}, from.data(), bytes, static_cast<unsigned char>(1));
  const auto [copies, copy_elapsed] = time_steps(seconds, [&] {
    ETNN_CHECK_CUDA(cudaMemcpyAsync(to.data(), from.data(), bytes, cudaMemcpyDeviceToDevice, etnn::cuda::stream()));
  });
  std::printf("result library=etnn device=cuda model=d2d_copy bytes=%zu gbps=%.1f steps=%ld\n", bytes,
              2.0 * static_cast<double>(bytes) * static_cast<double>(copies) / copy_elapsed / 1e9, copies);
  std::printf("result library=etnn device=cuda model=adam_vs_copy fraction=%.3f\n",
              (28.0 * n * static_cast<double>(steps) / elapsed) /
                  (2.0 * static_cast<double>(bytes) * static_cast<double>(copies) / copy_elapsed));
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1.0;
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::atof(argv[i + 1]);
  const std::string why = etnn::cuda::detail::cuda_unavailable_reason();
  if (!why.empty()) {
    std::printf("bench_cuda: skipped: %s\n", why.c_str());
    return 77;
  }
  cudaDeviceProp props{};
  ETNN_CHECK_CUDA(cudaGetDeviceProperties(&props, 0));
  std::printf("machine library=etnn gpu=\"%s\" sm=%d%d\n", props.name, props.major, props.minor);
  try {
    for (bool graphs : {true, false}) {
      mlp784<float>(64, graphs, seconds);
      mlp784<float>(4096, graphs, seconds);
      mlp64x4<float>(1 << 14, graphs, seconds);
      mlp64x4<float>(1 << 18, graphs, seconds);
      mlp64x4<etnn::bf16>(1 << 14, graphs, seconds);
      mlp64x4<etnn::bf16>(1 << 18, graphs, seconds);
    }
    mlp784<etnn::bf16>(4096, true, seconds);
    mlp64x4<etnn::bf16_unfused>(1 << 14, true, seconds);
    mlp64x4<etnn::bf16_unfused>(1 << 18, true, seconds);
    mlp784<etnn::fp16>(4096, true, seconds);
    mlp64x4<etnn::fp16>(1 << 14, true, seconds);
    mlp64x4<etnn::fp16>(1 << 18, true, seconds);
    mlp64x4<etnn::fp16_unfused>(1 << 18, true, seconds);
    optimizer_bandwidth(seconds);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda: %s\n", e.what());
    return 1;
  }
  return 0;
}
