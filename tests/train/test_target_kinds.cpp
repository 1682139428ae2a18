// Every kind of target (class indices, real-valued rows, multi-hot rows) through the public
// pipeline: Dataset<X, Y> + DataLoader (shuffled, with and without prefetch and drop_last) +
// Trainer trains bit for bit like a hand-written loop that gathers the same batches itself, and a
// run resumed from a training state equals the uninterrupted one.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "support/target_kinds.hpp"
#include "support/training.hpp"

namespace nn = etnn::nn;
namespace data = etnn::data;
using etnn::Shape;

namespace {

using X = Shape<6>;
template <class Y>
using Net = decltype(nn::input<6> >> nn::linear<16> >> nn::tanh >> nn::linear<etnn::test::TargetTask<Y>::outputs>);

template <class Model>
std::vector<float> parameters(const Model& model) {
  return {model.parameters(), model.parameters() + Model::flat_size};
}

// Two epochs of batches of 16 in the order RandomSampler{seed} gives, gathered by hand.
template <class Y, class Trainer>
void train_by_hand(Trainer& trainer, const data::Dataset<X, Y>& set, std::uint64_t seed, bool drop_last) {
  constexpr std::size_t batch = 16, k = data::target_size<Y>;
  std::vector<std::size_t> order(set.size());
  std::vector<float> x(batch * X::size);
  std::vector<data::target_value<Y>> y(batch * k);
  for (int epoch = 0; epoch < 2; ++epoch) {
    data::RandomSampler{seed}.fill(set.size(), epoch, order);
    for (std::size_t first = 0; first < order.size(); first += batch) {
      const std::size_t count = std::min(batch, order.size() - first);
      if (drop_last && count < batch) break;
      for (std::size_t r = 0; r < count; ++r) {
        std::copy_n(set.sample(order[first + r]), X::size, x.data() + r * X::size);
        std::copy_n(set.target(order[first + r]), k, y.data() + r * k);
      }
      const etnn::TensorView<const float, X> xs(x.data(), static_cast<int>(count));
      if constexpr (data::class_targets<Y>)
        trainer.step(xs, std::span<const int>(y.data(), count));
      else
        trainer.step(xs, etnn::TensorView<const float, data::target_shape<Y>>(y.data(), static_cast<int>(count)));
    }
  }
}

struct TempFile {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("etnn-kinds-" + std::to_string(::getpid()) + ".safetensors");
  ~TempFile() { std::filesystem::remove(path); }
};

// Steps [first, last) of a run over `set`, resumed from `resume` and saved to `save` when given.
template <class Y>
std::vector<float> run(const data::Dataset<X, Y>& set, int first, int last, const std::optional<TempFile>& resume,
                       const std::optional<TempFile>& save) {
  etnn::Model<Net<Y>> model(3);
  typename etnn::test::TargetTask<Y>::Loss loss;
  etnn::optim::Adam opt(model, {.lr = 0.01f});
  etnn::Trainer trainer(model, loss, opt);
  data::DataLoader loader(set, {.batch = 16, .shuffle = true, .seed = 8});
  if (resume) etnn::io::load_state(trainer, loader, resume->path);
  etnn::test::run_steps(trainer, loader, first, last);
  if (save) etnn::io::save_state(trainer, loader, save->path);
  return parameters(model);
}

}  // namespace

TEST_CASE_TEMPLATE("each kind of target trains through DataLoader and Trainer bitwise like a hand-written loop", Y,
                   data::ClassIndices, Shape<2>, data::MultiHot<3>) {
  const auto set = etnn::test::random_dataset<X, Y>(203, 9);  // 12 full batches and one of 11
  for (bool prefetch : {false, true}) {
    for (bool drop_last : {false, true}) {
      CAPTURE(prefetch);
      CAPTURE(drop_last);
      etnn::Model<Net<Y>> a(1), b(1);
      typename etnn::test::TargetTask<Y>::Loss loss;
      etnn::optim::SGD opt_a(a, {.lr = 0.05f, .momentum = 0.9f}), opt_b(b, {.lr = 0.05f, .momentum = 0.9f});
      etnn::Trainer loader_trainer(a, loss, opt_a), hand_trainer(b, loss, opt_b);
      data::DataLoader loader(set, {.batch = 16, .shuffle = true, .seed = 5, .drop_last = drop_last, .prefetch = prefetch});
      for (int epoch = 0; epoch < 2; ++epoch) {
        loader.set_epoch(epoch);
        for (auto batch : loader) {
          static_assert(std::is_same_v<decltype(batch), data::Batch<X, Y>>);
          loader_trainer.step(batch);
        }
      }
      train_by_hand<Y>(hand_trainer, set, 5, drop_last);
      const auto pa = parameters(a), pb = parameters(b);
      CHECK(std::memcmp(pa.data(), pb.data(), pa.size() * sizeof(float)) == 0);
      CHECK(pa != parameters(etnn::Model<Net<Y>>(1)));  // it trained
    }
  }
}

TEST_CASE_TEMPLATE("each kind of target resumes from a training state bitwise", Y, data::ClassIndices, Shape<2>,
                   data::MultiHot<3>) {
  const auto set = etnn::test::random_dataset<X, Y>(200, 4);  // 13 batches per epoch
  const auto uninterrupted = run<Y>(set, 0, 40, std::nullopt, std::nullopt);
  std::optional<TempFile> state(std::in_place);
  run<Y>(set, 0, 17, std::nullopt, state);
  const auto resumed = run<Y>(set, 17, 40, state, std::nullopt);
  CHECK(std::memcmp(uninterrupted.data(), resumed.data(), resumed.size() * sizeof(float)) == 0);
}
