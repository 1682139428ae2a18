// Multi-label classification: a small CNN predicts six yes/no attributes of a Fashion-MNIST image
// at once, trained with MultiLabelSoftMargin (one sigmoid per attribute), scored by per-attribute
// accuracy and micro-averaged F1.
//   multilabel [--data DIR] [--epochs 2] [--batch 64] [--lr 0.001] [--threads 0] [--seed 0]
//              [--limit N]
//
// The attributes of each class (the multi-hot target row of a sample is its class's row):
//   class          torso  long-sleeves  legs  footwear  closed-shoe  carried
//   0 T-shirt/top    1         0          0       0          0          0
//   1 Trouser        0         0          1       0          0          0
//   2 Pullover       1         1          0       0          0          0
//   3 Dress          1         0          1       0          0          0
//   4 Coat           1         1          0       0          0          0
//   5 Sandal         0         0          0       1          0          0
//   6 Shirt          1         1          0       0          0          0
//   7 Sneaker        0         0          0       1          1          0
//   8 Bag            0         0          0       0          0          1
//   9 Ankle boot     0         0          0       1          1          0
// A sample may have several attributes (a dress covers torso and legs) or one; unlike softmax
// over classes, each attribute is its own binary decision:
//   z = net(x): (B, 6) logits,  p_c = sigma(z_c),  attribute c predicted when z_c > 0
//   loss = -1/6 sum_c [ t_c log p_c + (1 - t_c) log(1 - p_c) ], averaged over the batch
//   micro-F1 = 2 TP / (2 TP + FP + FN) over every (sample, attribute) of the test set
// The attributes are functions of the class, so the hard cases are the classes' own confusions:
// long sleeves separates Shirt (1) from T-shirt/top (0), which look alike at 28x28.
//
// etnn::data::Dataset holds class labels; the loop turns each batch's labels into its multi-hot
// targets with the table.
#include <algorithm>
#include <array>
#include <cstdio>
#include <span>

#include "support/cli.hpp"
#include "support/training.hpp"

namespace nn = etnn::nn;

constexpr int num_attributes = 6;
constexpr std::array<const char*, num_attributes> attribute_names = {"torso",    "long-sleeves", "legs",
                                                                    "footwear", "closed-shoe",  "carried"};
constexpr std::array<std::array<float, num_attributes>, 10> attributes = {{
    {1, 0, 0, 0, 0, 0},  // T-shirt/top
    {0, 0, 1, 0, 0, 0},  // Trouser
    {1, 1, 0, 0, 0, 0},  // Pullover
    {1, 0, 1, 0, 0, 0},  // Dress
    {1, 1, 0, 0, 0, 0},  // Coat
    {0, 0, 0, 1, 0, 0},  // Sandal
    {1, 1, 0, 0, 0, 0},  // Shirt
    {0, 0, 0, 1, 1, 0},  // Sneaker
    {0, 0, 0, 0, 0, 1},  // Bag
    {0, 0, 0, 1, 1, 0},  // Ankle boot
}};

// PyTorch: Conv2d(1, 8, 3, padding=1), BatchNorm2d(8), ReLU, MaxPool2d(2),
//          Conv2d(8, 16, 3, padding=1), BatchNorm2d(16), ReLU, MaxPool2d(2),
//          Flatten, Linear(16*7*7, 64), ReLU, Linear(64, 6)
//   (1, 28, 28) -> (8, 28, 28) -> (8, 14, 14) -> (16, 14, 14) -> (16, 7, 7) -> 784 -> 64 -> 6
constexpr auto cnn = nn::input<1, 28, 28>
    >> nn::conv2d<8, 3, nn::pad<1>> >> nn::batch_norm >> nn::relu >> nn::max_pool2d<2>
    >> nn::conv2d<16, 3, nn::pad<1>> >> nn::batch_norm >> nn::relu >> nn::max_pool2d<2>
    >> nn::flatten >> nn::linear<64> >> nn::relu >> nn::linear<num_attributes>;
using Net = decltype(cnn);
using Image = etnn::Shape<1, 28, 28>;
using Attributes = etnn::Shape<num_attributes>;

namespace {

constexpr const char* usage =
    "usage: multilabel [--data DIR] [--epochs N] [--batch N] [--lr X] [--threads N] [--seed N] [--limit N]\n";

struct Options {
  example::fs::path data = example::default_data_dir;
  int epochs = 2;
  int batch = 64;
  float lr = 1e-3f;
  int threads = 0;
  std::uint64_t seed = 0;
  long limit = 0;
};

// targets row r = the attribute row of class labels[r].
void multi_hot(std::span<const int> labels, etnn::Tensor<float, Attributes>& targets) {
  targets.resize(static_cast<int>(labels.size()));
  for (std::size_t r = 0; r < labels.size(); ++r)
    for (int c = 0; c < num_attributes; ++c)
      targets(static_cast<int>(r), c) = attributes[static_cast<std::size_t>(labels[r])][static_cast<std::size_t>(c)];
}

struct TestScores {
  std::array<double, num_attributes> accuracy{};  // per attribute: fraction of samples right
  double exact = 0;                               // fraction with all six right
  double micro_f1 = 0;
};

template <class Model>
TestScores score(Model& model, const etnn::data::Dataset<Image>& test) {
  constexpr int chunk = 256;
  model.eval();
  etnn::metrics::MultiLabelF1 f1;
  std::array<std::size_t, num_attributes> right{};
  std::size_t exact = 0;
  etnn::Tensor<float, Attributes> targets(chunk), logits(chunk);
  for (std::size_t first = 0; first < test.size(); first += chunk) {
    const int n = static_cast<int>(std::min<std::size_t>(chunk, test.size() - first));
    const etnn::TensorView<const float, Image> x(test.sample(first), n);
    logits.resize(n);
    model.forward(x, logits.view());
    multi_hot(test.labels().subspan(first, static_cast<std::size_t>(n)), targets);
    f1.update(etnn::const_view(logits), etnn::const_view(targets));
    for (int b = 0; b < n; ++b) {
      bool all = true;
      for (int c = 0; c < num_attributes; ++c) {
        const bool ok = (logits(b, c) > 0.0f) == (targets(b, c) == 1.0f);
        right[static_cast<std::size_t>(c)] += ok ? 1 : 0;
        all = all && ok;
      }
      exact += all ? 1 : 0;
    }
  }
  model.train();
  TestScores s;
  const auto total = static_cast<double>(test.size());
  for (std::size_t c = 0; c < num_attributes; ++c) s.accuracy[c] = static_cast<double>(right[c]) / total;
  s.exact = static_cast<double>(exact) / total;
  s.micro_f1 = f1.result();
  return s;
}

int train(const Options& opt, const std::array<example::fs::path, 4>& files) {
  const auto data = example::load_mnist<Image>(files, opt.limit);
  etnn::Model<Net> model(opt.seed);
  etnn::loss::MultiLabelSoftMargin loss;
  etnn::optim::Adam adam(model, {.lr = opt.lr});
  etnn::Trainer trainer(model, loss, adam);
  etnn::data::DataLoader loader(data.train, {.batch = opt.batch, .shuffle = true, .seed = opt.seed});
  etnn::Tensor<float, Attributes> targets(opt.batch);

  std::printf("etnn multilabel: %s, %zu parameters\n", Net::describe().c_str(), Net::num_params);
  std::fputs(etnn::summary<Net>().c_str(), stdout);
  std::printf("data %s: %zu train, %zu test; %d attributes per image; batch %d, Adam lr %g, %d threads\n",
              opt.data.c_str(), data.train.size(), data.test.size(), num_attributes, opt.batch, opt.lr,
              etnn::num_threads());
  TestScores s;
  for (int epoch = 0; epoch < opt.epochs; ++epoch) {
    const auto stats = example::run_epoch(loader, epoch, opt.epochs, data.train.size(), [&](const auto& batch) {
      multi_hot(batch.y, targets);
      return trainer.step(batch.x, targets);
    });
    s = score(model, data.test);
    std::printf("epoch %2d/%d  train loss %.4f  test micro-F1 %.4f  exact match %.4f  %.2f s\n", epoch + 1,
                opt.epochs, stats.mean_loss(), s.micro_f1, s.exact, stats.seconds);
    std::fflush(stdout);
  }
  if (opt.epochs == 0) s = score(model, data.test);
  std::printf("test accuracy per attribute:");
  for (std::size_t c = 0; c < num_attributes; ++c) std::printf("  %s %.4f", attribute_names[c], s.accuracy[c]);
  std::printf("\ntest micro-F1 %.4f\n", s.micro_f1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  example::parse_flags(argc, argv, usage,
                       {{"--data", &opt.data}, {"--epochs", &opt.epochs}, {"--batch", &opt.batch},
                        {"--lr", &opt.lr}, {"--threads", &opt.threads}, {"--seed", &opt.seed},
                        {"--limit", &opt.limit}});
  if (opt.epochs < 0 || opt.batch <= 1 || opt.limit < 0) example::exit_with_usage(usage, 2);
  etnn::set_num_threads(opt.threads);
  return example::run_with_mnist_files("multilabel", opt.data, [&](const auto& files) { return train(opt, files); });
}
