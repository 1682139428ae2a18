// One training step (forward, cross-entropy, backward, SGD update) per iteration, on synthetic
// data held in memory, through the public API as a user trains: a data::Dataset of 16 batches,
// a shuffling data::DataLoader (each iteration takes its next batch; a new epoch, newly shuffled,
// when one ends) and the Trainer; warm-up excluded. gpt is examples/char_lm's model (4 causal transformer
// blocks over 128 tokens, width 128, 4 heads, 128 ids) under cross-entropy at every position. Counters: samples/s, GFLOP/s of the GEMM work, threads,
// and the process's peak resident memory so far (MiB; per configuration when only one runs).
//   build/release/benchmarks/bench_train --benchmark_counters_tabular=true
// One configuration (what scripts/compare.sh does), with machine-readable output:
//   build/release/benchmarks/bench_train --benchmark_filter='^mlp784/64/' --benchmark_format=json
#include <benchmark/benchmark.h>

#include <etnn/etnn.hpp>

#include "char_lm_model.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

namespace nn = etnn::nn;

namespace {

constexpr int batches_per_epoch = 16;

using Mlp784 = decltype(nn::input<784> >> nn::linear<512> >> nn::relu >> nn::linear<10>);
using Tiny = decltype(nn::input<32> >> nn::linear<64> >> nn::relu >> nn::linear<64> >> nn::relu >> nn::linear<10>);
using Wide = decltype(nn::input<784> >> nn::linear<2048> >> nn::relu >> nn::linear<2048> >> nn::relu >> nn::linear<10>);
// DESIGN.md's LeNet-5.
using Lenet = decltype(nn::input<1, 28, 28> >> nn::conv2d<6, 5, nn::pad<2>> >> nn::relu >> nn::max_pool2d<2> >>
                       nn::conv2d<16, 5> >> nn::relu >> nn::max_pool2d<2> >> nn::flatten >> nn::linear<120> >>
                       nn::relu >> nn::linear<84> >> nn::relu >> nn::linear<10>);

using Gpt = char_lm::Gpt;  // examples/char_lm_model.hpp

// The transformer's floating-point operations per sample of a step: per position and block the
// products with its 12 D^2 weights and, in attention, the (t + 1) scores and weighted values of
// width D at position t; then the head's D V. Each multiply-add is 2 flops, done in forward and in
// both gradients (3 passes; the first layer, the embedding, has no products).
constexpr double gpt_flops_per_sample() {
  const double d = char_lm::width, t = char_lm::context;
  const double attention_macs = 2.0 * d * (t * (t + 1) / 2);  // Q K^T and P V over the causal positions
  const double block_macs = 12.0 * d * d * t + attention_macs;
  return 2.0 * 3.0 * (char_lm::blocks * block_macs + d * char_lm::vocabulary * t);
}

// Multiply-adds of one layer's GEMM per sample and pass: weights times output pixels for a
// convolution, the weights for a linear layer, none for the others.
template <class L>
double gemm_macs() {
  if constexpr (requires { L::weight_size; L::geometry::out_pixels; })
    return static_cast<double>(L::weight_size) * L::geometry::out_pixels;
  else if constexpr (requires { L::in_features; })
    return static_cast<double>(L::params[0].numel());
  else
    return 0;
}

// Floating-point operations of one training step per sample: each multiply-add (2 flops) happens
// in forward, in the weight gradient, and in the input gradient of every layer but the first.
template <class Net>
double flops_per_sample() {
  if constexpr (std::is_same_v<Net, Gpt>) return gpt_flops_per_sample();
  double total = 0;
  bool first = true;
  [&]<class... Ls>(etnn::TypeList<Ls...>) {
    ([&] {
      const double macs = gemm_macs<Ls>();
      if (macs == 0) return;
      total += 2.0 * macs * (first ? 2 : 3);
      first = false;
    }(), ...);
  }(typename Net::layers{});
  return total;
}

template <class Net>
void train_step(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  using In = typename etnn::Model<Net>::input_shape;
  using Out = typename etnn::Model<Net>::output_shape;
  constexpr bool sequence = Out::rank == 2;  // a class per position: gpt
  etnn::Model<Net> model(0);
  std::conditional_t<sequence, etnn::loss::SequenceCrossEntropy, etnn::loss::CrossEntropy> loss;
  etnn::optim::SGD opt(model, {.lr = 0.01f});
  etnn::Trainer trainer(model, loss, opt);
  const std::size_t samples_per_epoch = std::size_t{batches_per_epoch} * static_cast<std::size_t>(batch);
  std::vector<float> x(samples_per_epoch * In::size);
  std::vector<int> y(samples_per_epoch * (sequence ? Out::dims[0] : 1));
  const int classes = sequence ? Out::dims[Out::rank - 1] : 10;
  etnn::Rng rng(1);
  for (float& v : x) {
    if constexpr (etnn::TokenShape<In>) v = static_cast<float>(rng.below(In::vocabulary));
    else v = static_cast<float>(rng.uniform(-1, 1));
  }
  for (auto& label : y) label = static_cast<int>(rng.below(static_cast<std::uint64_t>(classes)));
  using Data = std::conditional_t<sequence, etnn::data::Dataset<In, etnn::data::SequenceLabels<Out::dims[0]>>,
                                  etnn::data::Dataset<In>>;
  const Data data(std::move(x), std::move(y));
  etnn::data::DataLoader loader(data, {.batch = batch, .shuffle = true, .seed = 0});
  int epoch = 0;
  auto next = loader.begin();
  const auto step = [&] {
    if (next == loader.end()) {
      loader.set_epoch(++epoch);
      next = loader.begin();
    }
    const float loss_value = trainer.step(*next);
    ++next;
    return loss_value;
  };
  step();  // warm-up: sizes the workspace
  for (auto _ : state) benchmark::DoNotOptimize(step());
  const double samples = static_cast<double>(state.iterations()) * batch;
  state.counters["samples/s"] = benchmark::Counter(samples, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(samples * flops_per_sample<Net>() / 1e9, benchmark::Counter::kIsRate);
  state.counters["threads"] = etnn::num_threads();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);  // ru_maxrss: KiB on Linux
  state.counters["peak_rss_MiB"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// Backward alone (of a forward pass made once), its large weights' gradients in one product each or
// in row blocks, as a data-parallel step runs it when its buckets end inside layers
// (nn/weight_row_blocks.hpp): what the blocks cost.
//   build/release/benchmarks/bench_train --benchmark_filter=^backward --benchmark_repetitions=5
template <class Net, bool RowBlocks>
void backward(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  etnn::Model<Net> model(0);
  etnn::Tensor<float, typename etnn::Model<Net>::input_shape> x(batch);
  etnn::Rng rng(1);
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(rng.uniform(-1, 1));
  etnn::nn::TrainingPass<etnn::Model<Net>> pass(model);
  const auto out = pass.forward(x);
  // dL/dy, written again before each pass: backward reuses its memory for the layers' dL/dx.
  std::vector<float> dy(etnn::Model<Net>::output_shape::size * static_cast<std::size_t>(batch));
  for (float& v : dy) v = static_cast<float>(rng.uniform(-1, 1));
  const auto run = [&] {
    std::copy(dy.begin(), dy.end(), out.gradient);
    pass.backward(1.0f, [](std::size_t) {}, etnn::nn::Gradients::overwrite, RowBlocks);
  };
  run();
  for (auto _ : state) run();
  state.counters["samples/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * batch,
                                                   benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(backward<Mlp784, false>)->Name("backward/mlp784/whole")->Arg(64)->Arg(256)->UseRealTime();
BENCHMARK(backward<Mlp784, true>)->Name("backward/mlp784/row_blocks")->Arg(64)->Arg(256)->UseRealTime();
BENCHMARK(backward<Wide, false>)->Name("backward/wide/whole")->Arg(256)->UseRealTime();
BENCHMARK(backward<Wide, true>)->Name("backward/wide/row_blocks")->Arg(256)->UseRealTime();
BENCHMARK(train_step<Mlp784>)->Name("mlp784")->Arg(8)->Arg(64)->Arg(256)->UseRealTime();
BENCHMARK(train_step<Tiny>)->Name("tiny")->Arg(32)->UseRealTime();
BENCHMARK(train_step<Wide>)->Name("wide")->Arg(256)->UseRealTime();
BENCHMARK(train_step<Lenet>)->Name("lenet")->Arg(64)->UseRealTime();
BENCHMARK(train_step<Gpt>)->Name("gpt")->Arg(16)->UseRealTime();

BENCHMARK_MAIN();
