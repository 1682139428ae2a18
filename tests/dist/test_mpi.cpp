// Data parallelism over MPI, run by ctest under mpirun with 1 to 4 ranks on one machine, and on 2
// and 3 hosts (scripts/multihost.sh, ETNN_TEST_HOSTS): collectives, node detection,
// parameter broadcast, equivalence of N ranks with local batch b to one process with batch N*b,
// gradient accumulation, bucketing with and without overlap, model agreement across ranks, the
// non-finite guard (a NaN on one rank skips every rank's step) and loss scaling (an overflow on one
// rank backs off every rank's scale).
#include <doctest/doctest.h>

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "support/gradcheck.hpp"
#include "support/target_kinds.hpp"
#include "support/training.hpp"
#include "world.hpp"

namespace nn = etnn::nn;
using etnn::test::world;

namespace {

using Mlp784 = decltype(nn::input<784> >> nn::linear<512> >> nn::relu >> nn::linear<10>);
using Deep = decltype(nn::input<20> >> nn::linear<32> >> nn::tanh >> nn::linear<32> >> nn::gelu >> nn::linear<16> >>
                      nn::relu >> nn::linear<5>);

// n samples of shape S with random features and labels below `classes`, the same on every rank.
template <etnn::ShapeType S>
etnn::data::Dataset<S> random_dataset(std::size_t n, int classes, std::uint64_t seed) {
  std::vector<float> x(n * S::size);
  std::vector<int> y(n);
  etnn::test::fill_uniform(x.data(), x.size(), seed);
  etnn::Rng rng(seed + 1);
  for (auto& label : y) label = static_cast<int>(rng.below(static_cast<std::uint64_t>(classes)));
  return {std::move(x), std::move(y)};
}

// True on every rank when every rank's `values` equal rank 0's bit for bit.
template <class T>
bool identical_across_ranks(const T* values, std::size_t n) {
  std::vector<T> root(values, values + n);
  world().broadcast(root.data(), n, 0);
  int differs = n > 0 && std::memcmp(root.data(), values, n * sizeof(T)) != 0 ? 1 : 0;  // (no null to memcmp)
  world().allreduce_sum(&differs, 1);
  return differs == 0;
}

// The hosts the job runs on: ETNN_TEST_HOSTS, set by the multi-host tests (scripts/multihost.sh,
// one network namespace per host, as many ranks on each), else 1.
int hosts() {
  const char* h = std::getenv("ETNN_TEST_HOSTS");
  return h != nullptr ? std::atoi(h) : 1;
}

// Where sums go through shared memory: every rank on one machine, unless ETNN_DIST_SHARED_MEMORY=0
// (or there is one rank).
bool sums_in_shared_memory() {
  const bool expected = hosts() == 1 && world().size() > 1 && world().options().shared_memory;
  REQUIRE(world().sums_in_shared_memory() == expected);
  return expected;
}

// max |a - b| / max |b|
template <class T>
double relative_difference(const T* a, const T* b, std::size_t n) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

// Trains `steps` steps of local batch b on this rank's DistributedSampler share and, on every rank,
// the single-process reference with batch N * b on the same samples; returns the parameters'
// relative difference. Checks after every step that all ranks hold identical parameters.
template <class Net, class T>
double distributed_vs_single(int b, int steps, int accumulate, etnn::optim::BucketOptions buckets,
                             bool sync_batch_norm = false) {
  const int ranks = world().size();
  using In = typename etnn::Model<Net, T>::input_shape;
  constexpr int classes = etnn::Model<Net, T>::output_shape::size;
  const auto data = random_dataset<In>(static_cast<std::size_t>(ranks * b * steps), classes, 42);
  const etnn::optim::SgdOptions sgd{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f};

  etnn::Model<Net, T> reference(7);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD reference_opt(reference, sgd);
  etnn::Trainer reference_trainer(reference, loss, reference_opt);
  etnn::data::DataLoader reference_loader(data, {.batch = ranks * b, .shuffle = true, .seed = 3});

  // Each rank starts from a different seed: the optimizer broadcasts rank 0's parameters.
  etnn::Model<Net, T> model(7 + static_cast<std::uint64_t>(world().rank()) * 1000);
  etnn::optim::SGD opt(model, sgd, world(), buckets);
  etnn::Trainer trainer(model, loss, opt, {.accumulate = accumulate, .sync_batch_norm = sync_batch_norm});
  etnn::data::DataLoader loader(data, {.batch = b / accumulate,
                                       .sampler = etnn::data::DistributedSampler(world(), {.seed = 3})});
  REQUIRE(std::equal(model.parameters(), model.parameters() + Net::flat_size, reference.parameters()));

  for (auto batch : reference_loader) reference_trainer.step(batch);
  int micro = 0;
  for (auto batch : loader) {
    trainer.step(batch);
    if (++micro % accumulate == 0) REQUIRE(identical_across_ranks(model.parameters(), Net::flat_size));
  }
  REQUIRE(micro == steps * accumulate);
  if constexpr (etnn::Model<Net, T>::num_buffers > 0) {  // running statistics of the global batches
    REQUIRE(identical_across_ranks(model.buffers(), etnn::Model<Net, T>::num_buffers));
    const double tolerance = std::is_same_v<T, double> ? 1e-10 : 1e-5;
    CHECK(relative_difference(model.buffers(), reference.buffers(), etnn::Model<Net, T>::num_buffers) <= tolerance);
  }
  return relative_difference(model.parameters(), reference.parameters(), Net::flat_size);
}

}  // namespace

TEST_CASE("collectives: broadcast, allreduce, barrier, point to point") {
  const int rank = world().rank(), size = world().size();
  std::vector<double> v(1000, rank == 0 ? 3.5 : -1.0);
  world().broadcast(v.data(), v.size(), 0);
  CHECK(std::all_of(v.begin(), v.end(), [](double x) { return x == 3.5; }));
  std::vector<float> s(5, static_cast<float>(rank + 1));
  world().allreduce_sum(s.data(), s.size());
  CHECK(s[4] == static_cast<float>(size * (size + 1) / 2));
  world().barrier();
  if (size > 1) {
    int token = rank;
    const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
    if (rank == 0) {
      world().send(&token, 1, next);
      world().recv(&token, 1, previous);
      CHECK(token == size - 1);
    } else {
      int received = -1;
      world().recv(&received, 1, previous);
      CHECK(received == rank - 1);
      world().send(&token, 1, next);
    }
  }
  CHECK(world().local_rank() < world().local_size());
}

TEST_CASE_TEMPLATE("sums in flight together are exact, and the same bits on every rank, whatever the algorithm", T,
                   float, double) {
  // Run by ctest with MPI's allreduce, etnn's ring and the parameter server (ETNN_DIST_ALLREDUCE),
  // outside shared memory. Sizes from empty to past a ring's chunk per rank, all started before
  // any is waited for, and polled in turn, as gradient buckets are.
  const int rank = world().rank(), size = world().size();
  const std::vector<std::size_t> sizes{0, 1, 2, 5, 1000, 100003};
  std::vector<std::vector<T>> exact, rounded;
  std::vector<etnn::dist::Mpi::Pending> pending;
  etnn::Rng rng(100 + static_cast<std::uint64_t>(rank));
  for (const std::size_t n : sizes) {
    exact.emplace_back(n);
    rounded.emplace_back(n);
    for (std::size_t i = 0; i < n; ++i) {
      exact.back()[i] = static_cast<T>(i % 1000) + static_cast<T>(rank) * T(0.5);
      rounded.back()[i] = static_cast<T>(rng.uniform()) / T(3);  // sums that round
    }
  }
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    pending.push_back(world().start_allreduce_sum(exact[k].data(), sizes[k]));
    pending.push_back(world().start_allreduce_sum(rounded[k].data(), sizes[k]));
  }
  for (bool all_done = false; !all_done;) {
    all_done = true;
    for (auto& p : pending) all_done = world().poll(p) && all_done;
  }
  // The rounded sums against every rank's values, regenerated here and added in double.
  std::vector<std::vector<double>> reference;
  for (const std::size_t n : sizes) reference.emplace_back(n, 0.0);
  for (int r = 0; r < size; ++r) {
    etnn::Rng other(100 + static_cast<std::uint64_t>(r));
    for (auto& values : reference)
      for (double& v : values) v += static_cast<double>(static_cast<T>(other.uniform()) / T(3));
  }
  const T ranks_half = static_cast<T>(size * (size - 1)) * T(0.25);
  const double tolerance = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    std::size_t wrong = 0, far = 0;
    for (std::size_t i = 0; i < sizes[k]; ++i) {
      wrong += exact[k][i] != static_cast<T>(size) * static_cast<T>(i % 1000) + ranks_half ? 1 : 0;
      far += std::abs(static_cast<double>(rounded[k][i]) - reference[k][i]) > tolerance * reference[k][i] ? 1 : 0;
    }
    CHECK(wrong == 0);
    CHECK(far == 0);
    CHECK(identical_across_ranks(rounded[k].data(), sizes[k]));
  }
}

TEST_CASE("etnn finds the machines from MPI: ranks on several hosts sum over the network") {
  // On N hosts with as many ranks each, MPI_COMM_TYPE_SHARED holds this host's ranks only, so
  // sums leave shared memory by etnn's own node detection (no variable forces it).
  REQUIRE(world().size() % hosts() == 0);
  CHECK(world().local_size() == world().size() / hosts());
  const bool shared = sums_in_shared_memory();  // etnn's decision, checked against the hosts
  const etnn::dist::SharedStorage<float> storage = world().shared_storage<float>(1 << 16);
  CHECK(static_cast<bool>(storage) == shared);
}

TEST_CASE_TEMPLATE("sums through shared memory (from 1 KiB, on one machine) are exact across chunks and shares", T,
                   float, double) {
  // From a few cache lines per rank to past several 2 MiB chunks with an odd tail: every element
  // checked, every rank the same bits.
  const std::size_t slot_values = etnn::dist::detail::SharedMemorySum::slot_bytes / sizeof(T);
  const int rank = world().rank(), size = world().size();
  for (const std::size_t n : {std::size_t{300}, std::size_t{20000}, 3 * slot_values + 17}) {
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(i % 1000) + static_cast<T>(rank) * T(0.5);
    world().allreduce_sum(v.data(), n);
    const T ranks_half = static_cast<T>(size * (size - 1)) * T(0.25);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i)
      wrong += v[i] != static_cast<T>(size) * static_cast<T>(i % 1000) + ranks_half ? 1 : 0;
    CHECK(wrong == 0);
    CHECK(identical_across_ranks(v.data(), n));
  }
}

TEST_CASE_TEMPLATE("shared storage sums in place: every range exact, every rank the same bits; windows are reused", T,
                   float, double) {
  const int rank = world().rank(), size = world().size();
  const std::size_t n = 3 * 4099 + 5;
  const T* first = nullptr;
  {
    etnn::dist::SharedStorage<T> storage = world().shared_storage<T>(n);
    REQUIRE(static_cast<bool>(storage) == sums_in_shared_memory());
    if (!storage) return;
    REQUIRE(storage.size() == n);
    T* v = storage.data();
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(i % 1000) + static_cast<T>(rank) * T(0.5);
    // In three ranges, as gradient buckets are: from an odd offset, the rest, and a short head.
    world().allreduce_sum(v + 17, 4099);
    world().allreduce_sum(v + 4116, n - 4116);
    world().allreduce_sum(v, 17);
    const T ranks_half = static_cast<T>(size * (size - 1)) * T(0.25);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i)
      wrong += v[i] != static_cast<T>(size) * static_cast<T>(i % 1000) + ranks_half ? 1 : 0;
    CHECK(wrong == 0);
    CHECK(identical_across_ranks(v, n));
    first = v;
  }
  // Given back: the next storage of that size takes the same window (the first free one large
  // enough); while that one is in use, another gets a window of its own.
  const etnn::dist::SharedStorage<T> again = world().shared_storage<T>(n);
  const etnn::dist::SharedStorage<T> other = world().shared_storage<T>(n);
  CHECK(again.data() == first);
  CHECK(other.data() != first);
  CHECK(other.data() != nullptr);
}

TEST_CASE_TEMPLATE("a sum in place says whether it holds a NaN or an infinity, the same on every rank", T, float,
                   double) {
  const int rank = world().rank(), size = world().size();
  const std::size_t n = 5000;
  etnn::dist::SharedStorage<T> storage = world().shared_storage<T>(n);
  if (!storage) return;  // not summed in place: unchecked (the guard reads the sum itself)
  T* v = storage.data();
  const auto sum_of = [&](std::size_t offset, std::size_t count) {
    auto pending = world().start_allreduce_sum(v + offset, count);
    world().wait(pending);
    return etnn::dist::Mpi::finite_sum(pending);
  };
  std::fill_n(v, n, T(1));
  CHECK(sum_of(0, n) == 1);
  // A NaN and an infinity, each on the last rank only, in another rank's share of the sum (the
  // first values: rank 0's share), and at the end of a range from an odd offset.
  for (const T bad : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity()}) {
    std::fill_n(v, n, T(1));
    if (rank == size - 1) v[3] = bad;
    CHECK(sum_of(0, n) == 0);
    std::fill_n(v, n, T(1));
    if (rank == size - 1) v[n - 1] = bad;
    CHECK(sum_of(0, n - 1) == 1);  // the range ends before it
    CHECK(sum_of(7, n - 7) == 0);
  }
  // Finite terms whose sum overflows: the sum is what is checked.
  std::fill_n(v, n, std::numeric_limits<T>::max());
  CHECK(sum_of(0, n) == 0);
}

TEST_CASE("shared memory windows ask /dev/shm for room first, a quarter of it kept free") {
  struct statvfs fs {};
  REQUIRE(statvfs("/dev/shm", &fs) == 0);
  const auto total = static_cast<std::size_t>(fs.f_blocks) * fs.f_frsize;
  CHECK(etnn::dist::detail::shared_memory_has_room(std::size_t{1} << 20));
  CHECK_FALSE(etnn::dist::detail::shared_memory_has_room(total - total / 8));
}

TEST_CASE("a data-parallel optimizer keeps the gradients in shared memory for its life, then gives them back") {
  using Model = etnn::Model<Deep, double>;
  constexpr std::size_t n = Model::flat_size;
  const int rank = world().rank(), size = world().size();
  // True when every gradient is i * scale + offset.
  const auto gradients_are = [&](const Model& m, double scale, double offset) {
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) wrong += m.gradients()[i] != static_cast<double>(i) * scale + offset ? 1 : 0;
    return wrong == 0;
  };
  Model model(1);
  const double* own = model.gradients();
  for (std::size_t i = 0; i < n; ++i) model.gradients()[i] = static_cast<double>(i) + rank;
  {
    etnn::optim::SGD opt(model, {.lr = 0.1f}, world(), {.bucket_bytes = 4096});
    CHECK(opt.gradient_as_bucket_view() == sums_in_shared_memory());
    CHECK((model.gradients() != own) == sums_in_shared_memory());
    CHECK(gradients_are(model, 1, rank));  // they went along
    opt.step();                            // sums them across ranks, in place
    Model copied(2);
    etnn::optim::SGD copying(copied, {.lr = 0.1f}, world(), {.gradient_as_bucket_view = false});
    CHECK_FALSE(copying.gradient_as_bucket_view());
  }
  // Back in a buffer of the model's own, the reduced values with them.
  CHECK(gradients_are(model, size, size * (size - 1) / 2.0));
  if (sums_in_shared_memory()) {
    etnn::optim::SGD first(model, {.lr = 0.1f}, world());
    const double* in_first = model.gradients();
    {
      // A second optimizer takes the gradients into its storage; while it lives, the first's
      // going would not take them back, and its own going brings them back to the model.
      etnn::optim::SGD second(model, {.lr = 0.1f}, world());
      CHECK(model.gradients() != in_first);
      CHECK(second.gradient_as_bucket_view());
      CHECK_FALSE(first.gradient_as_bucket_view());
    }
    CHECK_FALSE(first.gradient_as_bucket_view());
    CHECK(gradients_are(model, size, size * (size - 1) / 2.0));
  }
}

TEST_CASE("N ranks with batch b train exactly like one process with batch N*b (float)") {
  const double difference = distributed_vs_single<Mlp784, float>(8, 20, 1, {});
  MESSAGE("mlp784 float, ", world().size(), " ranks: max relative parameter difference ", difference);
  CHECK(difference <= 1e-5);
}

TEST_CASE("N ranks with batch b train exactly like one process with batch N*b (double, small buckets)") {
  // 4 KiB buckets: the two large layers get one each, the two small last ones share one; each is
  // reduced while backward still runs.
  const double difference = distributed_vs_single<Deep, double>(6, 20, 1, {.bucket_bytes = 4096});
  MESSAGE("deep double, ", world().size(), " ranks: max relative parameter difference ", difference);
  CHECK(difference <= 1e-10);
  const double no_overlap = distributed_vs_single<Deep, double>(6, 20, 1, {.bucket_bytes = 4096, .overlap = false});
  CHECK(no_overlap <= 1e-10);
  const double copied = distributed_vs_single<Deep, double>(6, 20, 1, {.bucket_bytes = 4096, .gradient_as_bucket_view = false});
  CHECK(copied <= 1e-10);
  // 64 KiB buckets also end inside mlp784's first layer, between the row blocks of its weight
  // gradient (nn/weight_row_blocks.hpp), whose allreduces start as backward finishes each block.
  const double mlp = distributed_vs_single<Mlp784, double>(8, 20, 1, {.bucket_bytes = 1 << 16});
  MESSAGE("mlp784 double, ", world().size(), " ranks: max relative parameter difference ", mlp);
  CHECK(mlp <= 1e-10);
  const double by_layers =
      distributed_vs_single<Mlp784, double>(8, 20, 1, {.bucket_bytes = 1 << 16, .split_layers = false});
  CHECK(by_layers <= 1e-10);
}

TEST_CASE("gradient buckets end inside a large layer only where backward reports its row blocks") {
  etnn::Model<Mlp784, float> model(1);
  const bool several = world().size() > 1;
  // 512 KiB: the last layer and the first layer's bias with the second of its weight's 2 row
  // blocks (825 KB), then the first block.
  etnn::optim::SGD split(model, {.lr = 0.1f}, world(), {.bucket_bytes = 1 << 19});
  CHECK(split.bucket_count() == 2);
  CHECK(split.wants_row_blocks() == several);
  etnn::optim::SGD by_layers(model, {.lr = 0.1f}, world(), {.bucket_bytes = 1 << 19, .split_layers = false});
  CHECK(by_layers.bucket_count() == 1);
  CHECK_FALSE(by_layers.wants_row_blocks());
  // Without overlap nothing starts during backward, so nothing needs reporting.
  etnn::optim::SGD after(model, {.lr = 0.1f}, world(), {.bucket_bytes = 1 << 19, .overlap = false});
  CHECK(after.bucket_count() == 2);
  CHECK_FALSE(after.wants_row_blocks());
}

TEST_CASE("a loss with parameters of its own (ArcFace) trains on N ranks exactly like one process with batch N*b") {
  using Model = etnn::Model<decltype(nn::input<20> >> nn::linear<16> >> nn::tanh >> nn::linear<4>), double>;
  using Head = etnn::loss::ArcFace<4, 3, double>;
  constexpr int b = 6, steps = 10;
  const int ranks = world().size();
  const auto data = random_dataset<etnn::Shape<20>>(static_cast<std::size_t>(ranks * b * steps), 3, 5);
  const etnn::loss::ArcFaceOptions head_options{.scale = 16, .margin = 0.3f};

  Model reference(0);
  Head reference_head(head_options, 1);
  etnn::optim::SGD reference_opt(reference, {.lr = 0.05f});
  etnn::optim::SGD reference_head_opt(reference_head, {.lr = 0.5f});
  etnn::Trainer reference_trainer(reference, reference_head, reference_opt, reference_head_opt);
  etnn::data::DataLoader reference_loader(data, {.batch = ranks * b, .shuffle = true, .seed = 3});
  for (auto batch : reference_loader) reference_trainer.step(batch);

  // Every rank from other seeds: the optimizers broadcast rank 0's values.
  const std::uint64_t seed = 1000 * static_cast<std::uint64_t>(world().rank());
  Model model(seed);
  Head head(head_options, seed + 1);
  etnn::optim::SGD opt(model, {.lr = 0.05f}, world());
  etnn::optim::SGD head_opt(head, {.lr = 0.5f}, world());
  CHECK(head_opt.gradient_as_bucket_view() == sums_in_shared_memory());
  etnn::Trainer trainer(model, head, opt, head_opt);
  etnn::data::DataLoader loader(data, {.batch = b, .sampler = etnn::data::DistributedSampler(world(), {.seed = 3})});
  for (auto batch : loader) {
    trainer.step(batch);
    REQUIRE(identical_across_ranks(head.parameters(), Head::flat_size));
  }
  const double model_difference = relative_difference(model.parameters(), reference.parameters(), Model::flat_size);
  const double head_difference = relative_difference(head.parameters(), reference_head.parameters(), Head::flat_size);
  MESSAGE("embedding net + ArcFace, double, ", ranks, " ranks: max relative differences ", model_difference, " (model), ",
          head_difference, " (head)");
  CHECK(model_difference <= 1e-10);
  CHECK(head_difference <= 1e-10);
}

TEST_CASE_TEMPLATE("every kind of target: N ranks on DistributedSampler shares train like one process with batch N*b",
                   Y, etnn::data::ClassIndices, etnn::Shape<2>, etnn::data::MultiHot<3>) {
  using Task = etnn::test::TargetTask<Y>;
  using Model = etnn::Model<decltype(nn::input<6> >> nn::linear<16> >> nn::tanh >> nn::linear<Task::outputs>), double>;
  constexpr int b = 5, steps = 12;
  const int ranks = world().size();
  const auto data = etnn::test::random_dataset<etnn::Shape<6>, Y>(static_cast<std::size_t>(ranks * b * steps), 6);
  typename Task::Loss loss;
  Model reference(2);
  etnn::optim::SGD reference_opt(reference, {.lr = 0.05f, .momentum = 0.9f});
  etnn::Trainer reference_trainer(reference, loss, reference_opt);
  etnn::data::DataLoader reference_loader(data, {.batch = ranks * b, .shuffle = true, .seed = 3});
  for (auto batch : reference_loader) reference_trainer.step(batch);

  Model model(2 + 1000 * static_cast<std::uint64_t>(world().rank()));
  etnn::optim::SGD opt(model, {.lr = 0.05f, .momentum = 0.9f}, world());
  etnn::Trainer trainer(model, loss, opt);
  etnn::data::DataLoader loader(data, {.batch = b, .sampler = etnn::data::DistributedSampler(world(), {.seed = 3})});
  for (auto batch : loader) trainer.step(batch);
  REQUIRE(identical_across_ranks(model.parameters(), Model::flat_size));
  const double difference = relative_difference(model.parameters(), reference.parameters(), Model::flat_size);
  MESSAGE(ranks, " ranks: max relative parameter difference ", difference);
  CHECK(difference <= 1e-10);
}

TEST_CASE("gradient accumulation across ranks: k micro-batches of b/k equal one batch of N*b") {
  const double float_difference = distributed_vs_single<Mlp784, float>(8, 10, 2, {});
  CHECK(float_difference <= 1e-5);
  const double double_difference = distributed_vs_single<Deep, double>(8, 10, 4, {.bucket_bytes = 4096});
  MESSAGE("accumulate 4, deep double: max relative parameter difference ", double_difference);
  CHECK(double_difference <= 1e-10);
}

TEST_CASE("batch norm across ranks: each rank normalises its own batch (as DDP), all keep rank 0's statistics") {
  // Without synchronised batch norm, N ranks with batch b compute the gradient one process computes
  // by accumulating the N ranks' batches as N micro-batches (batch statistics are per micro-batch).
  // Running statistics are rank 0's on every rank after every step (DDP's broadcast_buffers).
  using BnNet = decltype(nn::input<12> >> nn::linear<16> >> nn::batch_norm >> nn::relu >> nn::linear<4>);
  using Model = etnn::Model<BnNet, double>;
  const int ranks = world().size(), b = 6, steps = 10;
  const auto data = random_dataset<etnn::Shape<12>>(static_cast<std::size_t>(ranks * b * steps), 4, 5);
  const etnn::optim::SgdOptions sgd{.lr = 0.05f, .momentum = 0.9f};
  etnn::loss::CrossEntropy loss;

  Model reference(3);
  etnn::optim::SGD reference_opt(reference, sgd);
  etnn::Trainer reference_trainer(reference, loss, reference_opt, {.accumulate = ranks});
  using Loader = etnn::data::DataLoader<etnn::data::Dataset<etnn::Shape<12>>>;
  std::vector<std::unique_ptr<Loader>> shares;  // rank r's share of the data, in this process
  for (int r = 0; r < ranks; ++r)
    shares.push_back(std::make_unique<Loader>(
        data, etnn::data::LoaderOptions{.batch = b, .sampler = etnn::data::DistributedSampler(r, ranks, {.seed = 3})}));
  std::vector<decltype(shares[0]->begin())> at;
  for (auto& share : shares) at.push_back(share->begin());

  // Each rank starts from its own seed and its own running statistics: rank 0's are broadcast.
  Model model(3 + static_cast<std::uint64_t>(world().rank()) * 1000);
  std::fill_n(model.buffers(), Model::num_buffers, static_cast<double>(world().rank()) + 0.5);
  std::copy_n(model.buffers(), Model::num_buffers, reference.buffers());
  world().broadcast(reference.buffers(), Model::num_buffers, 0);
  etnn::optim::SGD opt(model, sgd, world());
  etnn::Trainer trainer(model, loss, opt);
  etnn::data::DataLoader loader(data, {.batch = b, .sampler = etnn::data::DistributedSampler(world(), {.seed = 3})});
  REQUIRE(identical_across_ranks(model.buffers(), Model::num_buffers));
  REQUIRE(std::equal(model.parameters(), model.parameters() + BnNet::flat_size, reference.parameters()));

  int step = 0;
  for (auto batch : loader) {
    trainer.step(batch);
    for (auto& it : at) {
      reference_trainer.step(*it);
      ++it;
    }
    REQUIRE(identical_across_ranks(model.parameters(), BnNet::flat_size));
    REQUIRE(identical_across_ranks(model.buffers(), Model::num_buffers));
    ++step;
  }
  REQUIRE(step == steps);
  const double difference = relative_difference(model.parameters(), reference.parameters(), BnNet::flat_size);
  MESSAGE("batch norm net, ", ranks, " ranks: max relative parameter difference ", difference);
  CHECK(difference <= 1e-10);
  CHECK(model.buffers()[Model::named_buffers()[2].offset] == doctest::Approx(0.5 + steps));  // num_batches_tracked: rank 0's count
}

TEST_CASE("synchronised batch norm: N ranks with batch b train exactly like one process with batch N*b") {
  using BnNet = decltype(nn::input<12> >> nn::linear<16> >> nn::batch_norm >> nn::relu >> nn::linear<8> >>
                         nn::batch_norm >> nn::tanh >> nn::linear<4>);
  using ConvBn = decltype(nn::input<2, 6, 6> >> nn::conv2d<4, 3> >> nn::batch_norm >> nn::relu >> nn::flatten >>
                          nn::linear<3>);
  const double mlp = distributed_vs_single<BnNet, double>(6, 20, 1, {}, true);
  MESSAGE("batch norm MLP, ", world().size(), " ranks, sync_batch_norm: max relative parameter difference ", mlp);
  CHECK(mlp <= 1e-10);
  CHECK(distributed_vs_single<ConvBn, double>(4, 20, 1, {.bucket_bytes = 256}, true) <= 1e-10);
  CHECK(distributed_vs_single<BnNet, float>(6, 20, 1, {}, true) <= 1e-5);
}

TEST_CASE("ranks that build different models stop together with a clear error") {
  if (world().size() == 1) return;
  const etnn::optim::SgdOptions sgd{.lr = 0.1f};
  if (world().rank() == 0) {
    etnn::Model<Deep> model(0);
    CHECK_THROWS_WITH_AS(etnn::optim::SGD(model, sgd, world()), doctest::Contains("different model"), etnn::DistError);
  } else {
    etnn::Model<decltype(nn::input<20> >> nn::linear<5>)> model(0);
    CHECK_THROWS_WITH_AS(etnn::optim::SGD(model, sgd, world()), doctest::Contains("different model"), etnn::DistError);
  }
}

TEST_CASE("a model trained on N ranks and saved by rank 0 evaluates identically in one process") {
  const auto data = random_dataset<etnn::Shape<20>>(static_cast<std::size_t>(world().size()) * 64, 5, 8);
  etnn::Model<Deep> model(static_cast<std::uint64_t>(world().rank()));
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.1f, .momentum = 0.9f}, world());
  etnn::Trainer trainer(model, loss, opt);
  etnn::data::DataLoader loader(data, {.batch = 16, .sampler = etnn::data::DistributedSampler(world())});
  for (int epoch = 0; epoch < 3; ++epoch) {
    loader.set_epoch(epoch);
    for (auto batch : loader) trainer.step(batch);
  }
  // One file for the job, written by rank 0 into a directory every rank sees.
  std::string path = "/tmp/etnn-dist-checkpoint-";
  int job = world().rank() == 0 ? static_cast<int>(::getpid()) : 0;
  world().broadcast(&job, 1, 0);
  path += std::to_string(job) + ".safetensors";
  if (world().rank() == 0) etnn::io::save(model, path);
  world().barrier();
  etnn::Model<Deep> single(999);  // a fresh, single-process model
  etnn::io::load(single, path);
  world().barrier();
  if (world().rank() == 0) std::remove(path.c_str());
  etnn::Tensor<float, etnn::Shape<20>> x(32);
  etnn::test::fill_uniform(x.data(), x.size(), 77);
  const auto expected = model.forward(x);
  const auto got = single.forward(x);
  CHECK(std::memcmp(expected.data(), got.data(), expected.size() * sizeof(float)) == 0);
  CHECK(etnn::evaluate(single, data, etnn::metrics::accuracy) == etnn::evaluate(model, data, etnn::metrics::accuracy));
}

namespace {
// Steps [first, last) of a data-parallel run; resumes from / saves to `state` as asked (rank 0
// saves, every rank loads). Returns the parameters.
std::vector<float> train_ranks(const etnn::data::Dataset<etnn::Shape<20>>& data, int first, int last,
                               const std::string& resume, const std::string& save) {
  etnn::Model<Deep> model(static_cast<std::uint64_t>(world().rank()));
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.05f, .momentum = 0.9f}, world(), {.bucket_bytes = 4096});
  etnn::Trainer trainer(model, loss, opt);
  etnn::data::DataLoader loader(data, {.batch = 8, .sampler = etnn::data::DistributedSampler(world(), {.seed = 4})});
  if (!resume.empty()) etnn::io::load_state(trainer, loader, resume);
  etnn::test::run_steps(trainer, loader, first, last);
  if (!save.empty() && world().rank() == 0) etnn::io::save_state(trainer, loader, save);
  world().barrier();
  return {model.parameters(), model.parameters() + Deep::flat_size};
}
}  // namespace

TEST_CASE("resuming a data-parallel run from rank 0's training state is bitwise exact") {
  const auto data = random_dataset<etnn::Shape<20>>(static_cast<std::size_t>(world().size()) * 8 * 30, 5, 12);
  int job = world().rank() == 0 ? static_cast<int>(::getpid()) : 0;
  world().broadcast(&job, 1, 0);
  const std::string state = "/tmp/etnn-dist-state-" + std::to_string(job) + ".safetensors";
  const auto uninterrupted = train_ranks(data, 0, 100, "", "");
  train_ranks(data, 0, 43, "", state);
  const auto resumed = train_ranks(data, 43, 100, state, "");
  if (world().rank() == 0) std::remove(state.c_str());
  CHECK(std::memcmp(uninterrupted.data(), resumed.data(), resumed.size() * sizeof(float)) == 0);
}

TEST_CASE("a data-parallel training state is saved at accumulation boundaries only") {
  if (world().size() == 1) return;
  const auto data = random_dataset<etnn::Shape<20>>(static_cast<std::size_t>(world().size()) * 8 * 4, 5, 13);
  etnn::Model<Deep> model(0);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.05f}, world());
  etnn::Trainer trainer(model, loss, opt, {.accumulate = 2});
  etnn::data::DataLoader loader(data, {.batch = 4, .sampler = etnn::data::DistributedSampler(world())});
  for (auto batch : loader) {
    trainer.step(batch);  // micro step 1 of 2: each rank holds its own partial gradients
    break;
  }
  CHECK_THROWS_WITH_AS(etnn::io::save_state(trainer, loader, "/tmp/etnn-never-written.safetensors"),
                       doctest::Contains("accumulation boundary"), etnn::Error);
}

namespace {
// A cross-entropy whose value is infinite (its gradient stays cross-entropy's, finite) while `infinite`.
struct InfiniteLoss : etnn::loss::CrossEntropy {
  bool infinite = false;
  template <class View>
  float value_and_grad(etnn::Cpu device, View output, std::span<const int> labels, float* grad) const {
    const float v = CrossEntropy::value_and_grad(device, output, labels, grad);
    return infinite ? std::numeric_limits<float>::infinity() : v;
  }
};

// This rank's batch of `n` random samples (different on every rank) with labels below 5.
struct RankBatch {
  std::vector<float> x;
  std::vector<int> y;
};
RankBatch rank_batch(int n, std::size_t features, std::uint64_t seed) {
  RankBatch b{std::vector<float>(static_cast<std::size_t>(n) * features), std::vector<int>(static_cast<std::size_t>(n))};
  etnn::test::fill_uniform(b.x.data(), b.x.size(), seed + 100 * static_cast<std::uint64_t>(world().rank()));
  for (int i = 0; i < n; ++i) b.y[static_cast<std::size_t>(i)] = (i + world().rank()) % 5;
  return b;
}
}  // namespace

TEST_CASE("non-finite guard: a NaN in one rank's gradient skips the step on every rank, the error names the tensor") {
  etnn::Model<Deep> model(static_cast<std::uint64_t>(world().rank()));
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.05f, .momentum = 0.9f}, world(), {.bucket_bytes = 4096});
  etnn::Trainer trainer(model, loss, opt, {.accumulate = 2, .max_non_finite_in_a_row = 3});
  const bool poisoned = world().rank() == world().size() - 1;
  std::size_t offset = 0;
  for (const auto& p : etnn::Model<Deep>::named_parameters())
    if (p.name == "2.weight") offset = p.offset + 7;
  const auto window = [&](std::uint64_t seed, bool inject) {
    const RankBatch a = rank_batch(6, 20, seed), b = rank_batch(6, 20, seed + 1);
    trainer.step(etnn::TensorView<const float, etnn::Shape<20>>(a.x.data(), 6), a.y);
    if (inject && poisoned) model.gradients()[offset] = std::numeric_limits<float>::quiet_NaN();
    trainer.step(etnn::TensorView<const float, etnn::Shape<20>>(b.x.data(), 6), b.y);
  };
  window(1, false);
  window(3, false);
  REQUIRE(opt.steps() == 2);
  const std::vector<float> params(model.parameters(), model.parameters() + Deep::flat_size);
  const std::vector<float> momentum(opt.state(), opt.state() + opt.state_size());
  for (std::uint64_t k = 0; k < 2; ++k) {
    window(5 + 2 * k, true);
    CHECK(std::memcmp(params.data(), model.parameters(), params.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(momentum.data(), opt.state(), momentum.size() * sizeof(float)) == 0);
    CHECK(opt.steps() == 2);
    CHECK(trainer.skipped_steps() == static_cast<std::int64_t>(k + 1));
  }
  CHECK_THROWS_WITH_AS(window(9, true),
                       doctest::Contains("3 steps in a row with non-finite gradients (each skipped: the parameters are "
                                         "those before the first); first non-finite: '2.weight'"),
                       etnn::NonFiniteError);
  CHECK(std::memcmp(params.data(), model.parameters(), params.size() * sizeof(float)) == 0);
  CHECK(identical_across_ranks(model.parameters(), Deep::flat_size));
  window(11, false);  // the ranks still agree on their collectives, and train on
  CHECK(opt.steps() == 3);
  CHECK(trainer.non_finite_in_a_row() == 0);
  CHECK(identical_across_ranks(model.parameters(), Deep::flat_size));
  CHECK(std::memcmp(params.data(), model.parameters(), params.size() * sizeof(float)) != 0);
}

TEST_CASE("non-finite guard: a NaN sample on one rank, or a non-finite loss on one rank alone, skips every rank's step") {
  SUBCASE("a NaN sample: its gradients reach every rank through the sum") {
    using TanhNet = decltype(nn::input<20> >> nn::linear<16> >> nn::tanh >> nn::linear<5>);
    etnn::Model<TanhNet> model(static_cast<std::uint64_t>(world().rank()));
    etnn::loss::CrossEntropy loss;
    etnn::optim::Adam opt(model, {.lr = 1e-2f}, world());
    etnn::Trainer trainer(model, loss, opt, {.max_non_finite_in_a_row = 2});
    RankBatch b = rank_batch(8, 20, 21);
    trainer.step(etnn::TensorView<const float, etnn::Shape<20>>(b.x.data(), 8), b.y);
    const std::vector<float> params(model.parameters(), model.parameters() + TanhNet::flat_size);
    const std::vector<float> moments(opt.state(), opt.state() + opt.state_size());
    if (world().rank() == world().size() - 1) b.x[45] = std::numeric_limits<float>::quiet_NaN();
    const etnn::TensorView<const float, etnn::Shape<20>> x(b.x.data(), 8);
    trainer.step(x, b.y);
    CHECK(trainer.skipped_steps() == 1);
    CHECK(opt.steps() == 1);
    CHECK(std::memcmp(params.data(), model.parameters(), params.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(moments.data(), opt.state(), moments.size() * sizeof(float)) == 0);
    std::string expected = "first non-finite: '2.weight' (of the gradients backward computed, the first with a NaN or "
                           "an infinity); the loss was non-finite on 1 of ";
    expected += std::to_string(world().size());
    CHECK_THROWS_WITH_AS(trainer.step(x, b.y), doctest::Contains(expected.c_str()), etnn::NonFiniteError);
    CHECK(identical_across_ranks(model.parameters(), TanhNet::flat_size));
  }
  SUBCASE("an infinite loss with finite gradients on one rank: the all-reduced flag") {
    etnn::Model<Deep> model(0);
    InfiniteLoss loss;
    etnn::optim::SGD opt(model, {.lr = 0.05f}, world());
    etnn::Trainer trainer(model, loss, opt, {.max_non_finite_in_a_row = 1});
    const RankBatch b = rank_batch(4, 20, 31);
    const etnn::TensorView<const float, etnn::Shape<20>> x(b.x.data(), 4);
    trainer.step(x, b.y);
    const std::vector<float> params(model.parameters(), model.parameters() + Deep::flat_size);
    loss.infinite = world().rank() == world().size() - 1;
    std::string expected = "first non-finite: the loss (the gradients were finite); the loss was non-finite on 1 of ";
    expected += std::to_string(world().size());
    CHECK_THROWS_WITH_AS(trainer.step(x, b.y), doctest::Contains(expected.c_str()), etnn::NonFiniteError);
    CHECK(std::memcmp(params.data(), model.parameters(), params.size() * sizeof(float)) == 0);
    CHECK(opt.steps() == 1);
    loss.infinite = false;
    trainer.step(x, b.y);
    CHECK(opt.steps() == 2);
    CHECK(identical_across_ranks(model.parameters(), Deep::flat_size));
  }
}

TEST_CASE("loss scaling across ranks: one rank's overflow skips every rank's step and backs off every rank's scale") {
  // The last rank's inputs are 10^4 times larger: at a loss scale of 2^127 its gradients overflow
  // float, and the sum carries the infinity to every rank.
  RankBatch batch = rank_batch(8, 784, 21);
  if (world().rank() == world().size() - 1)
    for (float& v : batch.x) v *= 1e4f;
  const etnn::TensorView<const float, etnn::Shape<784>> x(batch.x.data(), 8);
  etnn::loss::CrossEntropy loss;
  etnn::Model<Mlp784> model(4), plain_model(4);
  etnn::optim::SGD opt(model, {.lr = 0.01f}, world()), plain_opt(plain_model, {.lr = 0.01f}, world());
  // One non-finite step would be an error; overflows are not non-finite steps.
  etnn::Trainer trainer(model, loss, opt,
                        {.max_non_finite_in_a_row = 1, .loss_scaling = etnn::LossScaling{.init_scale = 0x1p127f}});
  etnn::Trainer plain(plain_model, loss, plain_opt);
  int overflows = 0;
  while (opt.steps() == 0) {
    REQUIRE(overflows < 60);
    CHECK(std::isfinite(trainer.step(x, batch.y)));
    if (opt.steps() == 0) ++overflows;
  }
  MESSAGE(world().size(), " ranks: ", overflows, " overflows before the first update");
  CHECK(overflows > 0);
  CHECK(trainer.skipped_steps() == overflows);
  const float scale = trainer.loss_scale();
  CHECK(scale == std::ldexp(1.0f, 127 - overflows));
  CHECK(identical_across_ranks(&scale, 1));
  CHECK(identical_across_ranks(model.parameters(), Mlp784::flat_size));
  // The update at the scale that fits is the unscaled one (up to the odd subnormal the unscaled
  // products round and the scaled ones keep).
  plain.step(x, batch.y);
  CHECK(relative_difference(model.parameters(), plain_model.parameters(), Mlp784::flat_size) <= 1e-6);
}
