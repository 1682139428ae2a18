// LeNet-5 on Fashion-MNIST: two convolutions with batch norm, max pooling and three linear layers,
// trained with Adam and a cosine learning-rate schedule with warmup.
//   lenet [--data DIR] [--epochs 10] [--batch 64] [--lr 0.001] [--net bn|plain] [--threads 0]
//         [--seed 0] [--limit N] [--save PATH]
// --net plain trains DESIGN.md's LeNet-5 without batch norm. Pixels are scaled to [0, 1], then
// normalised with the training set's mean and standard deviation.
#include <cstdio>
#include <string>

#include "support/cli.hpp"
#include "support/training.hpp"

namespace nn = etnn::nn;

// PyTorch: Conv2d(1, 6, 5, padding=2), BatchNorm2d(6), ReLU, MaxPool2d(2), Conv2d(6, 16, 5), ...
constexpr auto lenet_bn = nn::input<1, 28, 28>
    >> nn::conv2d<6, 5, nn::pad<2>> >> nn::batch_norm >> nn::relu >> nn::max_pool2d<2>
    >> nn::conv2d<16, 5> >> nn::batch_norm >> nn::relu >> nn::max_pool2d<2>
    >> nn::flatten >> nn::linear<120> >> nn::relu >> nn::linear<84> >> nn::relu >> nn::linear<10>;

constexpr auto lenet = nn::input<1, 28, 28>
    >> nn::conv2d<6, 5, nn::pad<2>> >> nn::relu >> nn::max_pool2d<2>
    >> nn::conv2d<16, 5> >> nn::relu >> nn::max_pool2d<2>
    >> nn::flatten >> nn::linear<120> >> nn::relu >> nn::linear<84> >> nn::relu >> nn::linear<10>;

namespace {

constexpr const char* usage =
    "usage: lenet [--data DIR] [--epochs N] [--batch N] [--lr X] [--net bn|plain] [--threads N]\n"
    "             [--seed N] [--limit N] [--save PATH]\n";

struct Options {
  example::fs::path data = example::default_data_dir;
  int epochs = 10;
  int batch = 64;
  float lr = 1e-3f;
  std::string net = "bn";
  int threads = 0;
  std::uint64_t seed = 0;
  long limit = 0;
  example::fs::path save;
};

template <class Net>
int train(const Options& opt, const std::array<example::fs::path, 4>& files) {
  auto data = example::load_mnist<etnn::Shape<1, 28, 28>>(files, opt.limit);
  etnn::Model<Net> model(opt.seed);
  etnn::loss::CrossEntropy loss;
  etnn::optim::Adam adam(model, {.lr = opt.lr});
  etnn::data::DataLoader loader(data.train, {.batch = opt.batch, .shuffle = true, .seed = opt.seed});
  const auto steps = static_cast<std::int64_t>(loader.size()) * opt.epochs;
  adam.set_schedule(etnn::optim::schedule::CosineWarmup{.warmup = std::min<std::int64_t>(500, steps / 10),
                                                       .total = std::max<std::int64_t>(steps, 1)});
  etnn::Trainer trainer(model, loss, adam);

  std::printf("etnn lenet: %s, %zu parameters\n", Net::describe().c_str(), Net::num_params);
  std::fputs(etnn::summary<Net>().c_str(), stdout);
  std::printf("data %s: %zu train, %zu test; batch %d, Adam lr %g with cosine warmup, %d threads\n",
              opt.data.c_str(), data.train.size(), data.test.size(), opt.batch, opt.lr, etnn::num_threads());
  double accuracy = 0;
  for (int epoch = 0; epoch < opt.epochs; ++epoch) {
    const auto stats = example::run_epoch(loader, epoch, opt.epochs, data.train.size(),
                                          [&](const auto& batch) { return trainer.step(batch); });
    accuracy = etnn::evaluate(model, data.test, etnn::metrics::accuracy);
    example::print_epoch(epoch, opt.epochs, stats, accuracy);
  }
  std::printf("final test accuracy %.4f\n", accuracy);
  if (!opt.save.empty()) {
    etnn::io::save(model, opt.save);
    std::printf("saved %s\n", opt.save.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  example::parse_flags(argc, argv, usage,
                       {{"--data", &opt.data}, {"--epochs", &opt.epochs}, {"--batch", &opt.batch},
                        {"--lr", &opt.lr}, {"--net", &opt.net}, {"--threads", &opt.threads},
                        {"--seed", &opt.seed}, {"--limit", &opt.limit}, {"--save", &opt.save}});
  if (opt.epochs < 0 || opt.batch <= 1 || opt.limit < 0 || (opt.net != "bn" && opt.net != "plain"))
    example::exit_with_usage(usage, 2);
  etnn::set_num_threads(opt.threads);
  return example::run_with_mnist_files("lenet", opt.data, [&](const auto& files) {
    return opt.net == "bn" ? train<decltype(lenet_bn)>(opt, files) : train<decltype(lenet)>(opt, files);
  });
}
