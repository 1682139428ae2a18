// Data-parallel benchmark, run under mpirun (scripts/bench_dist.sh runs it on 2 ranks):
//   allreduce  bandwidth of a float sum from 1 KiB to 64 MiB (median of repetitions): algbw =
//              bytes / time, busbw = algbw * 2 (N - 1) / N (what each link carries); and the time of
//              the same sum of a range of SharedStorage, as a data-parallel optimizer's gradients are
//   weak       weak-scaling efficiency of training mlp784 (784-512-10) at batch 64 per rank, with
//              the default 25 MiB buckets and gradients summed in place where they live (shared
//              memory on one machine, BucketOptions::gradient_as_bucket_view), with the gradients
//              in the model's own buffer (copied through the reducer's), and with overlap off:
//              throughput(N ranks) / (N x throughput(1 rank)). This kind of machine (a 2-core VM)
//              drifts by tens of percent from second to second, so the two throughputs are measured
//              interleaved, in 60 rounds (--weak-rounds) of 20 steps each: one rank trains alone
//              (dist::Local, what a 1-rank job does) while the others sleep, then every rank trains
//              together in each setting, in an order that rotates (the settings' differences are
//              paired). Each throughput is its samples over its seconds summed over the rounds; the
//              quartiles of the rounds' own ratios show the spread. The ranks take turns training alone, since a
//              VM's cores differ too (by a quarter at times): rank 0's core alone would credit or
//              blame the efficiency with its own speed. Each round also has every rank train alone
//              at the same time, with no communication at all: that efficiency is what the machine
//              allows N busy cores. And "lockstep-only" trains alone on every rank with a barrier
//              after each step in place of the communication: what synchronous data parallelism
//              costs on this machine when communicating costs nothing, the bound for the others.
// `bench_dist --allreduce-bytes B...` measures the sums of those sizes only, and
// `bench_dist --weak-rounds R [wide]` the training only, in R rounds, of mlp784 or of wide
// (784-2048-2048-10) at batch 256 per rank (scripts/bench_dist.sh runs both across hosts, the
// sums with each of dist::Mpi's algorithms).
// Rank 0 prints one line per measurement: "allreduce <bytes> <us> <algbw GB/s> <busbw GB/s>
//  <us in place>" and
// "weak <setting> <ranks> <alone samples/s> <together samples/s> <efficiency %> <rounds' q1 %>
//  <rounds' q3 %> <no-communication efficiency %> buckets <n>".
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <etnn/dist/mpi.hpp>
#include <etnn/etnn.hpp>

namespace nn = etnn::nn;
using Clock = std::chrono::steady_clock;
using Mlp784 = decltype(nn::input<784> >> nn::linear<512> >> nn::relu >> nn::linear<10>);
using Wide = decltype(nn::input<784> >> nn::linear<2048> >> nn::relu >> nn::linear<2048> >> nn::relu >> nn::linear<10>);

namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The value at fraction q of the sorted values.
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

// The median time of an allreduce of n floats at data, over `repetitions` (rank 0's, on every rank).
double allreduce_seconds(etnn::dist::Mpi& world, float* data, std::size_t n, int repetitions) {
  std::vector<double> times;
  world.allreduce_sum(data, n);  // warm-up
  for (int r = 0; r < repetitions; ++r) {
    world.barrier();
    const auto start = Clock::now();
    world.allreduce_sum(data, n);
    times.push_back(seconds_since(start));
  }
  double t = quantile(times, 0.5);
  world.broadcast(&t, 1, 0);
  return t;
}

// Each size twice: a buffer of the program's own, and a range of SharedStorage (summed in place,
// as the gradients of a data-parallel optimizer are; 0 where there is none: across machines, or
// with MPI's own allreduce).
void allreduce_bandwidth(etnn::dist::Mpi& world, const std::vector<std::size_t>& sizes, int large_repetitions) {
  const std::size_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  etnn::dist::SharedStorage<float> storage = world.shared_storage<float>(max_bytes / sizeof(float));
  for (const std::size_t bytes : sizes) {
    const std::size_t n = bytes / sizeof(float);
    const int repetitions = bytes <= (std::size_t{1} << 20) ? 50 : large_repetitions;
    std::vector<float> data(n, 1.0f);
    const double t = allreduce_seconds(world, data.data(), n, repetitions);
    double in_place = 0;
    if (storage) {
      std::fill(storage.data(), storage.data() + n, 1.0f);
      in_place = allreduce_seconds(world, storage.data(), n, repetitions);
    }
    const double algbw = static_cast<double>(bytes) / t / 1e9;
    const double ranks = world.size();
    if (world.rank() == 0)
      std::printf("allreduce %zu %.1f %.3f %.3f %.1f\n", bytes, t * 1e6, algbw, algbw * 2 * (ranks - 1) / ranks,
                  in_place * 1e6);
  }
}

// A barrier that waiting ranks sleep through (polling every half millisecond) instead of spinning
// on a core, so that a rank training alone has the machine as a 1-rank job would.
void sleeping_barrier(etnn::dist::Mpi& world) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ibarrier(world.comm(), &request);
  int done = 0;
  for (MPI_Test(&request, &done, MPI_STATUS_IGNORE); !done; MPI_Test(&request, &done, MPI_STATUS_IGNORE))
    std::this_thread::sleep_for(std::chrono::microseconds(500));
}

// Throughput measured in pieces: samples and seconds summed over them.
struct Throughput {
  double samples = 0, seconds = 0;
  void add(double n, double s) { samples += n, seconds += s; }
  double rate() const { return samples / seconds; }
};

// One way of training together: a data-parallel trainer with these bucket options, or
// lockstep-only: each rank trains alone with a barrier after every step, as synchronous data
// parallelism would if communicating cost nothing (the bound for the others).
struct Setting {
  const char* name;
  etnn::optim::BucketOptions buckets;
  bool lockstep = false;
};

// A trainer of Net: alone (R = dist::Local) or data-parallel (dist::Mpi, with the world and
// bucket options as arguments).
template <class Net, class R>
struct Learner {
  using Model = etnn::Model<Net>;
  template <class... Reducer>
  explicit Learner(etnn::loss::CrossEntropy& loss, Reducer&&... reducer)
      : opt(model, {.lr = 0.01f}, std::forward<Reducer>(reducer)...), trainer(model, loss, opt) {}
  Model model{0};
  etnn::optim::SGD<Model, R> opt;
  etnn::Trainer<Model, etnn::loss::CrossEntropy, etnn::optim::SGD<Model, R>> trainer;
};

// Every round runs every setting, in an order that rotates, so that all settings see the same
// moments of the machine and their differences are paired.
template <class Net>
void weak_scaling(etnn::dist::Mpi& world, const std::vector<Setting>& settings, int batch, int rounds) {
  constexpr int steps = 20;
  constexpr std::size_t inputs = etnn::Model<Net>::input_shape::size;
  const int ranks = world.size();
  const std::size_t count = settings.size();
  etnn::Tensor<float, etnn::Shape<inputs>> x(batch);
  std::vector<int> y(batch);
  etnn::Rng rng(static_cast<std::uint64_t>(world.rank()) + 1);
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(rng.uniform(-1, 1));
  for (auto& label : y) label = static_cast<int>(rng.below(10));
  etnn::loss::CrossEntropy loss;
  Learner<Net, etnn::dist::Local> alone(loss);
  alone.trainer.reserve(batch);
  std::vector<std::unique_ptr<Learner<Net, etnn::dist::Mpi>>> together;  // the trainers keep addresses
  for (const Setting& s : settings) {
    together.push_back(std::make_unique<Learner<Net, etnn::dist::Mpi>>(loss, world, s.buckets));
    together.back()->trainer.reserve(batch);
  }
  // Seconds of `steps` steps of trainer (together: the ranks start and end in step).
  const auto run = [&](auto& trainer) {
    const auto start = Clock::now();
    for (int i = 0; i < steps; ++i) trainer.step(x, y);
    return seconds_since(start);
  };
  const auto run_together = [&](std::size_t k) {
    if (!settings[k].lockstep) return run(together[k]->trainer);
    const auto start = Clock::now();
    for (int i = 0; i < steps; ++i) {
      alone.trainer.step(x, y);
      world.barrier();
    }
    return seconds_since(start);
  };
  run(alone.trainer);  // warm-up
  world.barrier();
  for (std::size_t k = 0; k < count; ++k) run_together(k);
  const double samples = double{steps} * batch;
  Throughput alone_pooled, concurrent_pooled;  // concurrent: this rank's
  std::vector<Throughput> together_pooled(count);
  std::vector<std::vector<double>> efficiencies(count);
  for (int round = 0; round < rounds; ++round) {
    const int soloist = round % ranks;
    double alone_seconds = world.rank() == soloist ? run(alone.trainer) : 0.0;
    sleeping_barrier(world);
    world.broadcast(&alone_seconds, 1, soloist);
    alone_pooled.add(samples, alone_seconds);
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t k = (static_cast<std::size_t>(round) + i) % count;
      world.barrier();
      const double together_seconds = run_together(k);
      together_pooled[k].add(samples * ranks, together_seconds);
      efficiencies[k].push_back(100 * alone_seconds / together_seconds);  // the same samples per rank
    }
    world.barrier();
    concurrent_pooled.add(samples, run(alone.trainer));  // every rank alone, all at once
  }
  double concurrent_rate = concurrent_pooled.rate();  // summed over ranks
  world.allreduce_sum(&concurrent_rate, 1);
  const double ideal = ranks * alone_pooled.rate();
  for (std::size_t k = 0; world.rank() == 0 && k < count; ++k)
    std::printf("weak %s %d %.0f %.0f %.1f %.1f %.1f %.1f buckets %zu\n", settings[k].name, ranks, alone_pooled.rate(),
                together_pooled[k].rate(), 100 * together_pooled[k].rate() / ideal, quantile(efficiencies[k], 0.25),
                quantile(efficiencies[k], 0.75), 100 * concurrent_rate / ideal,
                settings[k].lockstep ? 0 : together[k]->opt.bucket_count());
}

}  // namespace

int main(int argc, char** argv) {
  etnn::dist::Mpi world(argc, argv);
  if (argc > 2 && std::string_view(argv[1]) == "--allreduce-bytes") {
    // Only the sums of these sizes, 5 repetitions of the large ones: across hosts on a slow link.
    std::vector<std::size_t> sizes;
    for (int a = 2; a < argc; ++a) sizes.push_back(std::strtoull(argv[a], nullptr, 10) / sizeof(float) * sizeof(float));
    allreduce_bandwidth(world, sizes, 5);
    return 0;
  }
  const std::vector<Setting> settings{{"lockstep-only", {}, true},
                                      {"overlap-25MiB", {}},
                                      {"overlap-25MiB-copied", {.gradient_as_bucket_view = false}},
                                      {"no-overlap", {.overlap = false}}};
  if (argc > 2 && std::string_view(argv[1]) == "--weak-rounds") {
    // Only the training, in fewer rounds: across hosts on a slow link; "wide" at batch 256 too.
    // Smaller buckets besides, cut inside the first layers at their weight gradients' row blocks
    // (etnn's default) and only between layers (DDP's): mlp784's 1.6 MB in 512 KiB buckets, wide's
    // 23.3 MB in 4 MiB ones.
    const int rounds = std::atoi(argv[2]);
    const bool wide = argc > 3 && std::string_view(argv[3]) == "wide";
    std::vector<Setting> with_small = settings;
    const std::size_t small = wide ? std::size_t{4} << 20 : std::size_t{512} << 10;
    with_small.push_back({wide ? "overlap-4MiB" : "overlap-512KiB", {.bucket_bytes = small}});
    with_small.push_back(
        {wide ? "overlap-4MiB-by-layers" : "overlap-512KiB-by-layers", {.bucket_bytes = small, .split_layers = false}});
    if (wide)
      weak_scaling<Wide>(world, with_small, 256, rounds);
    else
      weak_scaling<Mlp784>(world, with_small, 64, rounds);
    return 0;
  }
  std::vector<std::size_t> sizes;
  for (std::size_t bytes = 1024; bytes <= (std::size_t{64} << 20); bytes *= 4) sizes.push_back(bytes);
  allreduce_bandwidth(world, sizes, 10);
  weak_scaling<Mlp784>(world, settings, 64, 60);
  return 0;
}
