// Data-parallel benchmark, run under mpirun (scripts/bench_dist.sh runs it on 1 and 2 ranks):
//   allreduce  bandwidth of an in-place float sum from 1 KiB to 64 MiB (median of repetitions):
//              algbw = bytes / time, busbw = algbw * 2 (N - 1) / N (what each link carries)
//   train      samples/s of mlp784 (784-512-10) at batch 64 per rank over all ranks, with the
//              default 25 MiB buckets, with 1 MiB buckets, and with overlap off (median of rounds)
// Rank 0 prints one line per measurement: "allreduce <bytes> <us> <algbw GB/s> <busbw GB/s>" and
// "train <setting> <ranks> <samples/s>".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <etnn/dist/mpi.hpp>
#include <etnn/etnn.hpp>

namespace nn = etnn::nn;
using Clock = std::chrono::steady_clock;
using Mlp784 = decltype(nn::input<784> >> nn::linear<512> >> nn::relu >> nn::linear<10>);

namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void allreduce_bandwidth(etnn::dist::Mpi& world) {
  for (std::size_t bytes = 1024; bytes <= (std::size_t{64} << 20); bytes *= 4) {
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    const int repetitions = bytes <= (std::size_t{1} << 20) ? 50 : 10;
    std::vector<double> times;
    world.allreduce_sum(data.data(), data.size());  // warm-up
    for (int r = 0; r < repetitions; ++r) {
      world.barrier();
      const auto start = Clock::now();
      world.allreduce_sum(data.data(), data.size());
      times.push_back(seconds_since(start));
    }
    std::nth_element(times.begin(), times.begin() + repetitions / 2, times.end());
    double t = times[static_cast<std::size_t>(repetitions / 2)];
    world.broadcast(&t, 1, 0);
    const double algbw = static_cast<double>(bytes) / t / 1e9;
    const double n = world.size();
    if (world.rank() == 0)
      std::printf("allreduce %zu %.1f %.3f %.3f\n", bytes, t * 1e6, algbw, algbw * 2 * (n - 1) / n);
  }
}

void train_throughput(etnn::dist::Mpi& world, const char* setting, etnn::optim::BucketOptions buckets) {
  constexpr int batch = 64;
  etnn::Model<Mlp784> model(0);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.01f}, world, buckets);
  etnn::Trainer trainer(model, loss, opt);
  etnn::Tensor<float, etnn::Shape<784>> x(batch);
  std::vector<int> y(batch);
  etnn::Rng rng(static_cast<std::uint64_t>(world.rank()) + 1);
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(rng.uniform(-1, 1));
  for (auto& label : y) label = static_cast<int>(rng.below(10));
  trainer.reserve(batch);
  for (int i = 0; i < 20; ++i) trainer.step(x, y);  // warm-up
  // The median of 7 rounds: this kind of machine (a 2-core VM) varies a lot from second to second.
  constexpr int steps = 100, rounds = 7;
  std::vector<double> rates;
  for (int round = 0; round < rounds; ++round) {
    world.barrier();
    const auto start = Clock::now();
    for (int i = 0; i < steps; ++i) trainer.step(x, y);
    world.barrier();
    rates.push_back(steps * batch * world.size() / seconds_since(start));
  }
  std::nth_element(rates.begin(), rates.begin() + rounds / 2, rates.end());
  if (world.rank() == 0)
    std::printf("train %s %d %.0f buckets %zu\n", setting, world.size(), rates[rounds / 2], opt.bucket_count());
}

}  // namespace

int main(int argc, char** argv) {
  etnn::dist::Mpi world(argc, argv);
  allreduce_bandwidth(world);
  train_throughput(world, "overlap-25MiB", {});
  train_throughput(world, "overlap-1MiB", {.bucket_bytes = std::size_t{1} << 20});
  train_throughput(world, "no-overlap", {.overlap = false});
  return 0;
}
