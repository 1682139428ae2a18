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
// The Fashion-MNIST class labels are mapped through the table once, into a
// Dataset<Image, MultiHot<6>> whose batches go straight to the Trainer; etnn::evaluate gives the
// micro and macro F1.
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
using Attributes = etnn::data::MultiHot<num_attributes>;
using AttributeData = etnn::data::Dataset<Image, Attributes>;

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

// The same images with multi-hot targets: sample i's row is the attribute row of its class.
AttributeData with_attributes(etnn::data::Dataset<Image> classes) {
  std::vector<float> rows;
  rows.reserve(classes.size() * num_attributes);
  for (const int label : classes.labels())
    rows.insert(rows.end(), attributes[static_cast<std::size_t>(label)].begin(),
                attributes[static_cast<std::size_t>(label)].end());
  return std::move(classes).with_targets<Attributes>(std::move(rows));
}

// Per attribute, the samples predicted right (logit > 0 exactly where the target is 1), and those
// with all of them right.
struct AttributeCounts {
  std::array<std::size_t, num_attributes> right{};
  std::size_t exact = 0;
  std::size_t total = 0;

  double accuracy(std::size_t c) const { return static_cast<double>(right[c]) / static_cast<double>(total); }
  double exact_match() const { return total == 0 ? 0.0 : static_cast<double>(exact) / static_cast<double>(total); }
};

// A metric etnn::evaluate drives (it takes metrics by value), counting into `counts`.
struct AttributeAccuracy {
  AttributeCounts* counts;

  void update(etnn::TensorView<const float, etnn::Shape<num_attributes>> logits,
              etnn::TensorView<const float, etnn::Shape<num_attributes>> targets) {
    for (int b = 0; b < logits.batch(); ++b) {
      bool all = true;
      for (int c = 0; c < num_attributes; ++c) {
        const bool ok = (logits(b, c) > 0.0f) == (targets(b, c) == 1.0f);
        counts->right[static_cast<std::size_t>(c)] += ok ? 1 : 0;
        all = all && ok;
      }
      counts->exact += all ? 1 : 0;
    }
    counts->total += static_cast<std::size_t>(logits.batch());
  }
  double result() const { return counts->exact_match(); }
};

struct TestScores {
  AttributeCounts attributes;
  double micro_f1 = 0, macro_f1 = 0;
};

template <class Model>
TestScores score(Model& model, const AttributeData& test) {
  TestScores s;
  etnn::evaluate(model, test, AttributeAccuracy{&s.attributes});
  s.micro_f1 = etnn::evaluate(model, test, etnn::metrics::multilabel_f1);
  s.macro_f1 = etnn::evaluate(model, test, etnn::metrics::multilabel_macro_f1);
  return s;
}

int train(const Options& opt, const std::array<example::fs::path, 4>& files) {
  auto mnist = example::load_mnist<Image>(files, opt.limit);
  const AttributeData train_data = with_attributes(std::move(mnist.train));
  const AttributeData test_data = with_attributes(std::move(mnist.test));
  etnn::Model<Net> model(opt.seed);
  etnn::loss::MultiLabelSoftMargin loss;
  etnn::optim::Adam adam(model, {.lr = opt.lr});
  etnn::Trainer trainer(model, loss, adam);
  etnn::data::DataLoader loader(train_data, {.batch = opt.batch, .shuffle = true, .seed = opt.seed});

  std::printf("etnn multilabel: %s, %zu parameters\n", Net::describe().c_str(), Net::num_params);
  std::fputs(etnn::summary<Net>().c_str(), stdout);
  std::printf("data %s: %zu train, %zu test; %d attributes per image; batch %d, Adam lr %g, %d threads\n",
              opt.data.c_str(), train_data.size(), test_data.size(), num_attributes, opt.batch, opt.lr,
              etnn::num_threads());
  TestScores s;
  for (int epoch = 0; epoch < opt.epochs; ++epoch) {
    const auto stats = example::run_epoch(loader, epoch, opt.epochs, train_data.size(),
                                          [&](const auto& batch) { return trainer.step(batch); });
    s = score(model, test_data);
    std::printf("epoch %2d/%d  train loss %.4f  test micro-F1 %.4f  macro-F1 %.4f  exact match %.4f  %.2f s\n",
                epoch + 1, opt.epochs, stats.mean_loss(), s.micro_f1, s.macro_f1, s.attributes.exact_match(), stats.seconds);
    std::fflush(stdout);
  }
  if (opt.epochs == 0) s = score(model, test_data);
  std::printf("test accuracy per attribute:");
  for (std::size_t c = 0; c < num_attributes; ++c) std::printf("  %s %.4f", attribute_names[c], s.attributes.accuracy(c));
  std::printf("\ntest micro-F1 %.4f  macro-F1 %.4f\n", s.micro_f1, s.macro_f1);
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
