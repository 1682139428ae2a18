// The LibTorch peer of bench_train: one configuration, trained for a fixed time, one result line.
//   libtorch_train MODEL BATCH SECONDS THREADS
//   MODEL: mlp784 (784-512-10), tiny (32-64-64-10), wide (784-2048-2048-10), lenet (LeNet-5)
// One step is forward, cross-entropy, backward and an SGD update (lr 0.01) on synthetic inputs
// held in memory (uniform in [-1, 1], labels uniform in 0..9), with LibTorch's default
// initialization (the one etnn reproduces). Warm-up (at least 3 steps and 0.25 s) is excluded.
// Prints:  result library=libtorch model=M batch=B threads=T samples_per_s=S steps=N peak_rss_mb=R
#include <torch/torch.h>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace {

torch::nn::Sequential make_model(const std::string& name) {
  namespace tn = torch::nn;
  if (name == "mlp784") return tn::Sequential(tn::Linear(784, 512), tn::ReLU(), tn::Linear(512, 10));
  if (name == "tiny")
    return tn::Sequential(tn::Linear(32, 64), tn::ReLU(), tn::Linear(64, 64), tn::ReLU(), tn::Linear(64, 10));
  if (name == "wide")
    return tn::Sequential(tn::Linear(784, 2048), tn::ReLU(), tn::Linear(2048, 2048), tn::ReLU(), tn::Linear(2048, 10));
  if (name == "lenet")
    return tn::Sequential(tn::Conv2d(tn::Conv2dOptions(1, 6, 5).padding(2)), tn::ReLU(), tn::MaxPool2d(2),
                          tn::Conv2d(tn::Conv2dOptions(6, 16, 5)), tn::ReLU(), tn::MaxPool2d(2), tn::Flatten(),
                          tn::Linear(400, 120), tn::ReLU(), tn::Linear(120, 84), tn::ReLU(), tn::Linear(84, 10));
  throw std::invalid_argument("libtorch_train: unknown model '" + name + "' (mlp784, tiny, wide, lenet)");
}

std::vector<int64_t> input_shape(const std::string& name, int64_t batch) {
  if (name == "tiny") return {batch, 32};
  if (name == "lenet") return {batch, 1, 28, 28};
  return {batch, 784};
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL BATCH SECONDS THREADS\n", argv[0]);
    return 2;
  }
  const std::string name = argv[1];
  const int64_t batch = std::stoll(argv[2]);
  const double seconds = std::stod(argv[3]);
  const int threads = std::stoi(argv[4]);
  at::set_num_threads(threads);
  torch::manual_seed(0);

  auto model = make_model(name);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01));
  const auto x = torch::rand(input_shape(name, batch)) * 2 - 1;
  const auto y = torch::randint(0, 10, {batch}, torch::kLong);

  auto step = [&] {
    for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();  // zero_grad(set_to_none)
    auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    opt.step();
  };
  using Clock = std::chrono::steady_clock;
  const auto elapsed = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };

  auto t0 = Clock::now();
  for (int i = 0; i < 3 || elapsed(t0) < 0.25; ++i) step();  // warm-up
  long steps = 0;
  t0 = Clock::now();
  double t = 0;
  do {
    step();
    ++steps;
    t = elapsed(t0);
  } while (t < seconds);

  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);  // ru_maxrss: KiB on Linux
  std::printf("result library=libtorch model=%s batch=%lld threads=%d samples_per_s=%.1f steps=%ld peak_rss_mb=%.1f\n",
              name.c_str(), static_cast<long long>(batch), at::get_num_threads(),
              static_cast<double>(steps) * static_cast<double>(batch) / t, steps,
              static_cast<double>(usage.ru_maxrss) / 1024.0);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "libtorch_train: %s\n", e.what());
  return 1;
}
