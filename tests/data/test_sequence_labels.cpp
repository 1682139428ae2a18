// Datasets of token-id sequences with a label per position (Dataset<Tokens<T, V>,
// SequenceLabels<T>>): what a batch carries, what the dataset refuses, and a language model
// trained through DataLoader + Trainer.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <etnn/etnn.hpp>

namespace nn = etnn::nn;
using Labels = etnn::data::SequenceLabels<3>;
using Ids = etnn::Tokens<3, 8>;

TEST_CASE("a batch of sequence labels is a span of B T class indices in sample order") {
  // Sample i: ids (i, i + 1, i + 2) mod 8, labels the next id of each position.
  std::vector<float> x;
  std::vector<int> y;
  for (int i = 0; i < 5; ++i)
    for (int t = 0; t < 3; ++t) {
      x.push_back(static_cast<float>((i + t) % 8));
      y.push_back((i + t + 1) % 8);
    }
  y[4] = etnn::loss::ignore_index;  // sample 1, position 1
  etnn::data::Dataset<Ids, Labels> data(x, y);
  CHECK(data.size() == 5);
  etnn::data::DataLoader loader(data, {.batch = 2});
  std::vector<int> seen;
  for (auto batch : loader) {
    static_assert(std::is_same_v<decltype(batch.y), std::span<const int>>);
    CHECK(batch.y.size() == static_cast<std::size_t>(batch.x.batch()) * 3);
    seen.insert(seen.end(), batch.y.begin(), batch.y.end());
  }
  CHECK(seen == y);
}

TEST_CASE("sequence labels: a negative label other than ignore_index, or a short row, is refused") {
  std::vector<float> x(6, 0.0f);
  CHECK_THROWS_WITH_AS((etnn::data::Dataset<Ids, Labels>(x, std::vector<int>{0, 1, 2, 3, -5, 4})),
                       doctest::Contains("the target of sample 1 (value 1) is -5"), etnn::ShapeError);
  CHECK_THROWS_AS((etnn::data::Dataset<Ids, Labels>(x, std::vector<int>{0, 1, 2, 3})), etnn::ShapeError);
}

TEST_CASE("token ids: one outside [0, V) or not an integer is refused by the dataset, naming sample and position") {
  // The check a device run relies on: the embedding cannot throw there, so the ids are checked
  // once on the host when the dataset is built.
  const std::vector<int> y(6, 0);
  for (float bad : {8.0f, -1.0f, 0.5f}) {
    std::vector<float> x{0, 1, 2, 3, 4, 5};
    x[4] = bad;
    CHECK_THROWS_WITH_AS((etnn::data::Dataset<Ids, Labels>(x, y)),
                         doctest::Contains("etnn::data::Dataset: token id"), etnn::ShapeError);
    CHECK_THROWS_WITH_AS((etnn::data::Dataset<Ids, Labels>(x, y)),
                         doctest::Contains("of sample 1, position 1 is outside [0, 8)"), etnn::ShapeError);
  }
  CHECK_NOTHROW((etnn::data::Dataset<Ids, Labels>(std::vector<float>{0, 1, 2, 3, 4, 7}, y)));
}

TEST_CASE("a causal language model learns to predict the next id through DataLoader + Trainer") {
  // Sequences of the cycle 0, 1, ..., 7 from random starts: the next id is a function of the
  // current one, so the loss must fall far below the uniform log 8.
  constexpr int T = 6;
  etnn::Rng rng(1);
  std::vector<float> x;
  std::vector<int> y;
  for (int i = 0; i < 64; ++i) {
    const int start = static_cast<int>(rng.below(8));
    for (int t = 0; t < T; ++t) {
      x.push_back(static_cast<float>((start + t) % 8));
      y.push_back((start + t + 1) % 8);
    }
  }
  etnn::data::Dataset<etnn::Tokens<T, 8>, etnn::data::SequenceLabels<T>> data(x, y);
  using Net = decltype(nn::input_tokens<T, 8> >> nn::embedding<16> >> nn::positional_embedding >>
                       nn::residual(nn::layer_norm >> nn::multi_head_attention<2, true>) >> nn::layer_norm >>
                       nn::linear<8>);
  etnn::Model<Net> model(2);
  etnn::loss::SequenceCrossEntropy loss;
  etnn::optim::AdamW opt(model, {.lr = 0.01f});
  etnn::Trainer trainer(model, loss, opt);
  etnn::data::DataLoader loader(data, {.batch = 16, .shuffle = true, .seed = 3});
  float first = 0, last = 0;
  for (int epoch = 0; epoch < 40; ++epoch) {
    loader.set_epoch(epoch);
    for (auto batch : loader) {
      last = trainer.step(batch);
      if (epoch == 0 && first == 0) first = last;
    }
  }
  MESSAGE("first batch loss ", first, ", last ", last);
  CHECK(first > 1.5f);
  CHECK(last < 0.1f);
}
