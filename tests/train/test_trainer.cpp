// Training end to end: learning a synthetic problem, determinism, evaluation, mixed precision
// between data and model.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "support/gradcheck.hpp"
#include "support/training.hpp"

namespace nn = etnn::nn;

namespace {
// Three classes in 8 dimensions: the largest of three linear scores, with points closer than
// 0.1 to a decision boundary left out so that the problem is separable.
etnn::data::Dataset<etnn::Shape<8>> synthetic(int n, std::uint64_t seed) {
  std::vector<float> x(static_cast<std::size_t>(n) * 8);
  std::vector<int> y(static_cast<std::size_t>(n));
  etnn::Rng rng(seed);
  for (int i = 0; i < n; ++i) {
    float* row = x.data() + static_cast<std::size_t>(i) * 8;
    float s[3];
    int best = 0;
    do {
      for (int j = 0; j < 8; ++j) row[j] = static_cast<float>(rng.uniform(-1, 1));
      s[0] = row[0] + row[1];
      s[1] = row[2] - row[3];
      s[2] = row[4] * 0.5f - row[5];
      best = s[0] > s[1] ? (s[0] > s[2] ? 0 : 2) : (s[1] > s[2] ? 1 : 2);
    } while (s[best] - std::max(s[(best + 1) % 3], s[(best + 2) % 3]) < 0.1f);
    y[static_cast<std::size_t>(i)] = best;
  }
  return {std::move(x), std::move(y)};
}

using Net = decltype(nn::input<8> >> nn::linear<32> >> nn::relu >> nn::linear<32> >> nn::relu >> nn::linear<3>);
}  // namespace

TEST_CASE("a small network learns a synthetic problem to >= 99% accuracy") {
  const auto train = synthetic(4000, 1);
  const auto test = synthetic(1000, 2);
  etnn::Model<Net> model(0);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.05f, .momentum = 0.9f});
  etnn::Trainer trainer(model, loss, opt);
  etnn::data::DataLoader loader(train, {.batch = 32, .shuffle = true, .seed = 0});
  const double before = etnn::evaluate(model, test, etnn::metrics::accuracy);
  float first_loss = 0, last_loss = 0;
  for (int epoch = 0; epoch < 30; ++epoch) {
    loader.set_epoch(epoch);
    for (auto batch : loader) {
      last_loss = trainer.step(batch);
      if (first_loss == 0) first_loss = last_loss;
    }
  }
  const double after = etnn::evaluate(model, test, etnn::metrics::accuracy);
  MESSAGE("synthetic accuracy ", before, " -> ", after, ", loss ", first_loss, " -> ", last_loss);
  CHECK(after >= 0.99);
  CHECK(last_loss < first_loss / 10);
}

namespace {
// Parameters after 100 steps of SGD with Nesterov momentum on shuffled batches.
std::vector<float> train_100_steps(const etnn::data::Dataset<etnn::Shape<8>>& train) {
  etnn::Model<Net> model(11);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.05f, .momentum = 0.9f, .nesterov = true});
  etnn::Trainer trainer(model, loss, opt);
  etnn::data::DataLoader loader(train, {.batch = 32, .shuffle = true, .seed = 5});
  loader.set_epoch(0);
  int steps = 0;
  for (auto batch : loader) {
    trainer.step(batch);
    if (++steps == 100) break;
  }
  REQUIRE(steps == 100);
  return std::vector<float>(model.parameters(), model.parameters() + Net::flat_size);
}
}  // namespace

TEST_CASE("same seed, bitwise-identical parameters after 100 steps, whatever the thread count") {
  const auto train = synthetic(3200, 3);
  const auto a = train_100_steps(train);
  const auto b = train_100_steps(train);
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  // Every output element of a GEMM is one thread's full dot product, and every bias gradient is
  // one thread's column sum in row order: the thread count changes who computes, not the order.
  const int saved = etnn::num_threads();
  etnn::set_num_threads(1);
  const auto one_thread = train_100_steps(train);
  etnn::set_num_threads(3);
  const auto three_threads = train_100_steps(train);
  etnn::set_num_threads(saved);
  CHECK(std::memcmp(a.data(), one_thread.data(), a.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(a.data(), three_threads.data(), a.size() * sizeof(float)) == 0);
}

TEST_CASE("a double model trains from float data like a float model, and step(x, y) takes plain views") {
  const auto train = synthetic(64, 4);
  etnn::Model<Net, double> precise(0);
  etnn::Model<Net, float> single(0);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD precise_opt(precise, {.lr = 0.1f, .momentum = 0.9f});
  etnn::optim::SGD single_opt(single, {.lr = 0.1f, .momentum = 0.9f});
  etnn::Trainer precise_trainer(precise, loss, precise_opt);
  etnn::Trainer single_trainer(single, loss, single_opt);
  const etnn::TensorView<const float, etnn::Shape<8>, etnn::Cpu> x(train.sample(0), 64);
  double first = 0, last = 0;
  for (int i = 0; i < 30; ++i) {
    last = precise_trainer.step(x, train.labels());
    first = i == 0 ? last : first;
    single_trainer.step(x, train.labels());
  }
  CHECK(last < first / 2);
  double worst = 0;
  for (std::size_t i = 0; i < Net::flat_size; ++i)
    worst = std::max(worst, std::abs(precise.parameters()[i] - static_cast<double>(single.parameters()[i])));
  MESSAGE("float vs double parameters after 30 steps: max difference ", worst);
  CHECK(worst < 1e-4);
  CHECK_THROWS_AS(precise_trainer.step(x.first(0), train.labels().subspan(0, 0)), etnn::ShapeError);
}

TEST_CASE("accuracy metric") {
  etnn::Tensor<float, etnn::Shape<3>> scores(4);
  const float values[] = {0.1f, 0.9f, 0.0f, 2, 1, 0, 0, 0, 5, 1, 1, 1};
  std::copy(std::begin(values), std::end(values), scores.data());
  const std::vector<int> labels{1, 0, 1, 0};
  auto acc = etnn::metrics::accuracy;
  acc.update(etnn::const_view(scores), labels);
  CHECK(acc.result() == doctest::Approx(0.75));
  const std::vector<int> too_few{1, 0};
  CHECK_THROWS_WITH_AS(acc.update(etnn::const_view(scores), too_few), doctest::Contains("2 labels for 4 score rows"),
                       etnn::ShapeError);
}

TEST_CASE("gradient accumulation: k micro-batches of b train like one batch of k*b") {
  const auto train = synthetic(512, 6);
  auto run = [&](int batch, int accumulate) {
    etnn::Model<Net, double> model(3);
    etnn::loss::CrossEntropy loss;
    etnn::optim::SGD opt(model, {.lr = 0.1f, .momentum = 0.9f});
    etnn::Trainer trainer(model, loss, opt, {.accumulate = accumulate});
    etnn::data::DataLoader loader(train, {.batch = batch, .shuffle = true, .seed = 1});
    for (auto b : loader) trainer.step(b);
    CHECK(opt.steps() == static_cast<std::int64_t>(512 / (batch * accumulate)));
    return std::vector<double>(model.parameters(), model.parameters() + Net::flat_size);
  };
  const auto big = run(64, 1);
  const auto micro = run(16, 4);
  double worst = 0;
  for (std::size_t i = 0; i < big.size(); ++i) worst = std::max(worst, std::abs(big[i] - micro[i]));
  MESSAGE("accumulate 4 x 16 vs batch 64, double: max parameter difference ", worst);
  CHECK(worst < 1e-12);
  CHECK_THROWS_AS(([&] {
                    etnn::Model<Net> m(0);
                    etnn::loss::CrossEntropy l;
                    etnn::optim::SGD o(m, {.lr = 0.1f});
                    etnn::Trainer t(m, l, o, {.accumulate = 0});
                  }()),
                  etnn::Error);
}

TEST_CASE("a step's first backward writes the gradients: that batch's alone, for every kind of layer; a failed step leaves zeros") {
  // Dense layers write their gradients in the first micro-batch; conv, batch norm and the residual
  // block add to zeros the executor writes first. Either way the gradients after a step are
  // exactly those of zero_grad() and one backward of the same batch from the same parameters.
  using Mixed = decltype(nn::input<2, 6, 6> >> nn::conv2d<3, 3, nn::pad<1>> >> nn::batch_norm >> nn::relu >>
                         nn::flatten >> nn::linear<16> >> nn::relu >> nn::residual(nn::linear<16> >> nn::tanh) >>
                         nn::linear<3>);
  using Model = etnn::Model<Mixed, double>;
  using Batch = etnn::TensorView<const double, etnn::Shape<2, 6, 6>>;
  std::vector<double> x(2 * 16 * 72);
  etnn::test::fill_uniform(x.data(), x.size(), 8);
  std::vector<int> y(32);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int>(i % 3);
  const Batch first(x.data(), 16), second(x.data() + 16 * 72, 16);
  const std::span<const int> first_labels(y.data(), 16), second_labels(y.data() + 16, 16);

  Model stepped(4), reference(4);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD stepped_opt(stepped, {.lr = 0.1f, .momentum = 0.9f});
  etnn::optim::SGD reference_opt(reference, {.lr = 0.1f, .momentum = 0.9f});
  etnn::Trainer stepped_trainer(stepped, loss, stepped_opt);
  etnn::Trainer reference_trainer(reference, loss, reference_opt);
  stepped_trainer.step(first, first_labels);
  reference_trainer.step(first, first_labels);
  stepped_trainer.step(second, second_labels);  // its backward writes over the first step's gradients
  reference.zero_grad();
  reference_trainer.accumulate_gradients(second, second_labels);  // adds to zeros
  const std::vector<double> written(stepped.gradients(), stepped.gradients() + Mixed::flat_size);
  const std::vector<double> added(reference.gradients(), reference.gradients() + Mixed::flat_size);
  CHECK(written == added);
  CHECK(std::any_of(written.begin(), written.end(), [](double g) { return g != 0.0; }));

  // A label out of range throws in the loss, before backward: the stale gradients become zeros.
  std::vector<int> bad(second_labels.begin(), second_labels.end());
  bad[5] = 7;
  CHECK_THROWS_AS(stepped_trainer.step(second, std::span<const int>(bad)), etnn::Error);
  CHECK(std::all_of(stepped.gradients(), stepped.gradients() + Mixed::flat_size, [](double g) { return g == 0.0; }));
}

TEST_CASE("a CNN with batch norm, pooling, dropout and a residual block is bitwise reproducible, whatever the thread count") {
  using Cnn = decltype(etnn::nn::input<2, 10, 10> >> etnn::nn::conv2d<4, 3, etnn::nn::pad<1>> >> etnn::nn::batch_norm >>
                       etnn::nn::relu >> etnn::nn::max_pool2d<2> >>
                       etnn::nn::residual(etnn::nn::conv2d<4, 3, etnn::nn::pad<1>> >> etnn::nn::tanh) >>
                       etnn::nn::flatten >> etnn::nn::dropout >> etnn::nn::linear<3>);
  std::vector<float> x(32 * 200);
  etnn::Rng rng(4);
  for (auto& v : x) v = static_cast<float>(rng.uniform(-1, 1));
  std::vector<int> y(32);
  for (auto& label : y) label = static_cast<int>(rng.below(3));
  const auto train = [&](int threads) {
    const int saved = etnn::num_threads();
    etnn::set_num_threads(threads);
    etnn::Model<Cnn> model(2);
    etnn::loss::CrossEntropy loss;
    etnn::optim::Adam opt(model, {.lr = 1e-2f});
    etnn::Trainer trainer(model, loss, opt);
    const etnn::TensorView<const float, etnn::Shape<2, 10, 10>> batch(x.data(), 32);
    for (int step = 0; step < 30; ++step) trainer.step(batch, y);
    etnn::set_num_threads(saved);
    std::vector<float> out(model.parameters(), model.parameters() + Cnn::flat_size);
    out.insert(out.end(), model.buffers(), model.buffers() + etnn::Model<Cnn>::num_buffers);
    return out;
  };
  const auto one = train(1), again = train(1), three = train(3);
  CHECK(one == again);
  CHECK(one == three);
}

TEST_CASE("same seed, ranks and threads: a CNN with batch norm, dropout and Adam is bitwise identical after 100 steps in 3 runs") {
  using Cnn = decltype(etnn::nn::input<1, 8, 8> >> etnn::nn::conv2d<4, 3, etnn::nn::pad<1>> >> etnn::nn::batch_norm >>
                       etnn::nn::relu >> etnn::nn::max_pool2d<2> >> etnn::nn::flatten >> etnn::nn::dropout >>
                       etnn::nn::linear<3>);
  using Model = etnn::Model<Cnn>;
  std::vector<float> features(320 * 64);
  etnn::test::fill_uniform(features.data(), features.size(), 21);
  std::vector<int> labels(320);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int>(i % 3);
  const etnn::data::Dataset<etnn::Shape<1, 8, 8>> data(std::move(features), std::move(labels));
  // Parameters, running statistics and Adam's moments after 100 steps on shuffled batches of 16
  // (5 epochs), with a fresh dropout mask per step.
  const auto run = [&] {
    Model model(9);
    etnn::loss::CrossEntropy loss;
    etnn::optim::Adam opt(model, {.lr = 1e-2f});
    etnn::Trainer trainer(model, loss, opt);
    etnn::data::DataLoader loader(data, {.batch = 16, .shuffle = true, .seed = 13});
    etnn::test::run_steps(trainer, loader, 0, 100);
    REQUIRE(opt.steps() == 100);
    std::vector<float> out(model.parameters(), model.parameters() + Cnn::flat_size);
    out.insert(out.end(), model.buffers(), model.buffers() + Model::num_buffers);
    out.insert(out.end(), opt.state(), opt.state() + opt.state_size());
    return out;
  };
  const auto first = run(), second = run(), third = run();
  CHECK(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(first.data(), third.data(), first.size() * sizeof(float)) == 0);
}
