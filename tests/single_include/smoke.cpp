// Trains a small classifier including nothing of etnn but the single header.
#include <etnn/etnn.hpp>

#include <cstdio>
#include <vector>

namespace nn = etnn::nn;

int main() {
  // Two classes: the sign of x0 + x1.
  constexpr int n = 256;
  std::vector<float> features(n * 2);
  std::vector<int> labels(n);
  etnn::Rng rng(1);
  for (int i = 0; i < n; ++i) {
    features[2 * i] = static_cast<float>(rng.uniform(-1, 1));
    features[2 * i + 1] = static_cast<float>(rng.uniform(-1, 1));
    labels[i] = features[2 * i] + features[2 * i + 1] > 0 ? 1 : 0;
  }
  etnn::data::Dataset<etnn::Shape<2>> data(std::move(features), std::move(labels));
  etnn::Model<decltype(nn::input<2> >> nn::linear<16> >> nn::tanh >> nn::linear<2>)> model(0);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.1f, .momentum = 0.9f});
  etnn::Trainer trainer(model, loss, opt);
  etnn::data::DataLoader loader(data, {.batch = 32, .shuffle = true, .seed = 0});
  for (int epoch = 0; epoch < 20; ++epoch) {
    loader.set_epoch(epoch);
    for (auto batch : loader) trainer.step(batch);
  }
  const double acc = etnn::evaluate(model, data, etnn::metrics::accuracy);
  std::printf("single header: accuracy %.3f\n", acc);
  return acc > 0.95 ? 0 : 1;
}
