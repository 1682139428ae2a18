// Data-parallel benchmark, run under mpirun (scripts/bench_dist.sh runs it on 2 ranks):
//   allreduce  bandwidth of an in-place float sum from 1 KiB to 64 MiB (median of repetitions):
//              algbw = bytes / time, busbw = algbw * 2 (N - 1) / N (what each link carries)
//   weak       weak-scaling efficiency of training mlp784 (784-512-10) at batch 64 per rank, with
//              the default 25 MiB buckets, with 1 MiB buckets, and with overlap off, measured in
//              pairs: each round rank 0 first trains alone (dist::Local: what a 1-rank job does)
//              while the other ranks sleep, then every rank trains together; the round's
//              efficiency is together / (N x alone). Both halves of a pair run within a second of
//              each other, since this kind of machine (a 2-core VM) drifts by tens of percent from
//              minute to minute; the median over rounds, and the quartiles, are printed. Each round
//              also has every rank train alone at the same time (no communication at all): that
//              efficiency is what the machine allows two busy cores, the ceiling for the others.
// Rank 0 prints one line per measurement: "allreduce <bytes> <us> <algbw GB/s> <busbw GB/s>" and
// "weak <setting> <ranks> <alone samples/s> <together samples/s> <efficiency %> <q1 %> <q3 %>
//  <no-communication efficiency %> buckets <n>".
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include <etnn/dist/mpi.hpp>
#include <etnn/etnn.hpp>

namespace nn = etnn::nn;
using Clock = std::chrono::steady_clock;
using Mlp784 = decltype(nn::input<784> >> nn::linear<512> >> nn::relu >> nn::linear<10>);

namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The value at fraction q of the sorted values.
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

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
    double t = quantile(times, 0.5);
    world.broadcast(&t, 1, 0);
    const double algbw = static_cast<double>(bytes) / t / 1e9;
    const double n = world.size();
    if (world.rank() == 0)
      std::printf("allreduce %zu %.1f %.3f %.3f\n", bytes, t * 1e6, algbw, algbw * 2 * (n - 1) / n);
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

void weak_scaling(etnn::dist::Mpi& world, const char* setting, etnn::optim::BucketOptions buckets) {
  constexpr int batch = 64, steps = 60, rounds = 15;
  etnn::Tensor<float, etnn::Shape<784>> x(batch);
  std::vector<int> y(batch);
  etnn::Rng rng(static_cast<std::uint64_t>(world.rank()) + 1);
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(rng.uniform(-1, 1));
  for (auto& label : y) label = static_cast<int>(rng.below(10));
  etnn::loss::CrossEntropy loss;
  etnn::Model<Mlp784> alone_model(0), together_model(0);
  etnn::optim::SGD alone_opt(alone_model, {.lr = 0.01f});
  etnn::optim::SGD together_opt(together_model, {.lr = 0.01f}, world, buckets);
  etnn::Trainer alone(alone_model, loss, alone_opt);
  etnn::Trainer together(together_model, loss, together_opt);
  alone.reserve(batch);
  together.reserve(batch);
  // samples/s of `steps` steps of trainer; together: over all ranks, which start and end in step.
  const auto rate = [&](auto& trainer, int ranks) {
    const auto start = Clock::now();
    for (int i = 0; i < steps; ++i) trainer.step(x, y);
    return static_cast<double>(steps) * batch * ranks / seconds_since(start);
  };
  if (world.rank() == 0) rate(alone, 1);  // warm-up
  sleeping_barrier(world);
  rate(together, world.size());
  std::vector<double> alone_rates, together_rates, efficiencies, ceilings;
  for (int round = 0; round < rounds; ++round) {
    double alone_rate = world.rank() == 0 ? rate(alone, 1) : 0.0;
    sleeping_barrier(world);
    world.broadcast(&alone_rate, 1, 0);
    world.barrier();
    const double together_rate = rate(together, world.size());
    world.barrier();
    double concurrent_rate = rate(alone, 1);  // every rank alone, all at once: summed below
    world.allreduce_sum(&concurrent_rate, 1);
    const double ideal = world.size() * alone_rate;
    alone_rates.push_back(alone_rate);
    together_rates.push_back(together_rate);
    efficiencies.push_back(100 * together_rate / ideal);
    ceilings.push_back(100 * concurrent_rate / ideal);
  }
  if (world.rank() == 0)
    std::printf("weak %s %d %.0f %.0f %.1f %.1f %.1f %.1f buckets %zu\n", setting, world.size(),
                quantile(alone_rates, 0.5), quantile(together_rates, 0.5), quantile(efficiencies, 0.5),
                quantile(efficiencies, 0.25), quantile(efficiencies, 0.75), quantile(ceilings, 0.5),
                together_opt.bucket_count());
}

}  // namespace

int main(int argc, char** argv) {
  etnn::dist::Mpi world(argc, argv);
  allreduce_bandwidth(world);
  weak_scaling(world, "overlap-25MiB", {});
  weak_scaling(world, "overlap-1MiB", {.bucket_bytes = std::size_t{1} << 20});
  weak_scaling(world, "no-overlap", {.overlap = false});
  return 0;
}
