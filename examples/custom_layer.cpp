// A user-defined layer in a network: PReLU (examples/prelu.hpp, written outside the library) between
// two linear layers, trained on Fashion-MNIST with Adam. The layer plugs into `>>`, the summary,
// parameter names and checkpoints exactly as a built-in one does.
//   custom_layer [--data DIR] [--epochs 2] [--batch 64] [--lr 0.001] [--threads 0] [--seed 0]
//                [--limit N]
// Pixels are scaled to [0, 1], then normalised with the training set's mean and standard deviation.
#include <algorithm>
#include <cstdio>

#include "prelu.hpp"
#include "support/cli.hpp"
#include "support/training.hpp"

namespace nn = etnn::nn;

//   x: (B, 784) -> linear: (B, 256) -> prelu, 256 slopes: (B, 256) -> linear: (B, 10) logits
// As PyTorch: nn.Sequential(nn.Linear(784, 256), nn.PReLU(256), nn.Linear(256, 10)).
constexpr auto net = nn::input<784> >> nn::linear<256> >> custom::prelu >> nn::linear<10>;
using Net = decltype(net);

namespace {

constexpr const char* usage =
    "usage: custom_layer [--data DIR] [--epochs N] [--batch N] [--lr X] [--threads N] [--seed N]\n"
    "                    [--limit N]\n";

struct Options {
  example::fs::path data = example::default_data_dir;
  int epochs = 2;
  int batch = 64;
  float lr = 1e-3f;
  int threads = 0;
  std::uint64_t seed = 0;
  long limit = 0;
};

int train(const Options& opt, const std::array<example::fs::path, 4>& files) {
  auto data = example::load_mnist<etnn::Shape<784>>(files, opt.limit);
  etnn::Model<Net> model(opt.seed);
  etnn::loss::CrossEntropy loss;
  etnn::optim::Adam adam(model, {.lr = opt.lr});
  etnn::data::DataLoader loader(data.train, {.batch = opt.batch, .shuffle = true, .seed = opt.seed});
  etnn::Trainer trainer(model, loss, adam);

  std::printf("etnn custom_layer: %s, %zu parameters\n", Net::describe().c_str(), Net::num_params);
  std::fputs(etnn::summary<Net>().c_str(), stdout);
  std::printf("data %s: %zu train, %zu test; batch %d, Adam lr %g, %d threads\n", opt.data.c_str(),
              data.train.size(), data.test.size(), opt.batch, opt.lr, etnn::num_threads());

  // The slopes are an ordinary parameter tensor: "1.weight", 256 values in the flat buffer.
  const auto slopes = [&] {
    for (const auto& p : model.named_parameters())
      if (p.name == "1.weight") {
        const float* a = model.parameters() + p.offset;
        const auto [lo, hi] = std::minmax_element(a, a + p.numel);
        double mean = 0;
        for (std::size_t c = 0; c < p.numel; ++c) mean += a[c] / static_cast<double>(p.numel);
        std::printf("prelu slopes (1.weight): mean %.4f, min %.4f, max %.4f\n", mean, *lo, *hi);
      }
  };
  slopes();
  double accuracy = 0;
  for (int epoch = 0; epoch < opt.epochs; ++epoch) {
    const auto stats = example::run_epoch(loader, epoch, opt.epochs, data.train.size(),
                                          [&](const auto& batch) { return trainer.step(batch); });
    accuracy = etnn::evaluate(model, data.test, etnn::metrics::accuracy);
    example::print_epoch(epoch, opt.epochs, stats, accuracy);
  }
  slopes();
  std::printf("final test accuracy %.4f\n", accuracy);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  example::parse_flags(argc, argv, usage,
                       {{"--data", &opt.data}, {"--epochs", &opt.epochs}, {"--batch", &opt.batch},
                        {"--lr", &opt.lr}, {"--threads", &opt.threads}, {"--seed", &opt.seed},
                        {"--limit", &opt.limit}});
  if (opt.epochs < 0 || opt.batch <= 0 || opt.limit < 0) example::exit_with_usage(usage, 2);
  etnn::set_num_threads(opt.threads);
  return example::run_with_mnist_files("custom_layer", opt.data, [&](const auto& files) { return train(opt, files); });
}
