// Dataset and DataLoader: coverage of every sample per epoch, seeded orders, prefetch, early exits,
// worker errors, no allocation per batch, and the dataset statistics.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <new>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <etnn/data/data.hpp>

// Counts every global allocation of this test program, from any thread.
namespace {
std::atomic<long> allocations{0};
}  // namespace

void* operator new(std::size_t bytes) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
// Not inlined, so that GCC does not pair this free() with the caller's operator new (-Wmismatched-new-delete).
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using etnn::data::DataLoader;
using etnn::data::Dataset;
using Row = etnn::Shape<3>;

// Sample i: x = (i, 2i, i % 5), label i % 5; x[0] identifies the sample.
Dataset<Row> numbered(std::size_t n) {
  std::vector<float> x;
  std::vector<int> y;
  for (std::size_t i = 0; i < n; ++i) {
    const auto f = static_cast<float>(i);
    x.insert(x.end(), {f, 2 * f, static_cast<float>(i % 5)});
    y.push_back(static_cast<int>(i % 5));
  }
  return Dataset<Row>(std::move(x), std::move(y));
}

// One epoch as seen by the caller: the sample ids in order and each batch's size, checking on the way
// that every row and label equals the dataset's.
struct Epoch {
  std::vector<std::size_t> ids;
  std::vector<int> sizes;
  bool operator==(const Epoch&) const = default;
};

template <class Loader>
Epoch run(Loader& loader, const Dataset<Row>& data) {
  Epoch epoch;
  for (auto batch : loader) {
    REQUIRE(batch.y.size() == static_cast<std::size_t>(batch.x.batch()));
    epoch.sizes.push_back(batch.x.batch());
    for (int r = 0; r < batch.x.batch(); ++r) {
      const auto id = static_cast<std::size_t>(batch.x(r, 0));
      REQUIRE(id < data.size());
      CHECK(batch.y[static_cast<std::size_t>(r)] == data.label(id));
      CHECK(std::equal(batch.x.sample(r), batch.x.sample(r) + Row::size, data.sample(id)));
      epoch.ids.push_back(id);
    }
  }
  return epoch;
}

bool is_sorted_range(const std::vector<std::size_t>& ids) {
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] != i) return false;
  return true;
}

// Sample `bad` throws, to exercise error propagation from the worker.
struct FailingDataset {
  using shape = Row;
  Dataset<Row> data = numbered(20);
  std::size_t bad = 7;
  std::size_t size() const { return data.size(); }
  const float* sample(std::size_t i) const {
    if (i == bad) throw std::runtime_error("unreadable sample");
    return data.sample(i);
  }
  int label(std::size_t i) const { return data.label(i); }
};

}  // namespace

static_assert(std::input_iterator<DataLoader<Dataset<Row>>::Iterator>);
static_assert(std::sentinel_for<std::default_sentinel_t, DataLoader<Dataset<Row>>::Iterator>);
// A loader over a temporary would dangle; it does not compile.
static_assert(!std::is_constructible_v<DataLoader<Dataset<Row>>, Dataset<Row>&&>);

TEST_CASE("every sample appears exactly once per epoch, with the partial last batch unless drop_last") {
  const auto data = numbered(10);
  for (bool shuffle : {false, true}) {
    for (bool drop_last : {false, true}) {
      for (bool prefetch : {false, true}) {
        CAPTURE(shuffle);
        CAPTURE(drop_last);
        CAPTURE(prefetch);
        DataLoader loader(data,
                          {.batch = 3, .shuffle = shuffle, .seed = 5, .drop_last = drop_last, .prefetch = prefetch});
        CHECK(loader.size() == (drop_last ? 3u : 4u));
        for (int e = 0; e < 3; ++e) {
          loader.set_epoch(e);
          const Epoch epoch = run(loader, data);
          CHECK(epoch.sizes == (drop_last ? std::vector<int>{3, 3, 3} : std::vector<int>{3, 3, 3, 1}));
          std::vector<std::size_t> ids = epoch.ids;
          CHECK(is_sorted_range(ids) == !shuffle);
          std::sort(ids.begin(), ids.end());
          CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
          if (!drop_last) CHECK(is_sorted_range(ids));
        }
      }
    }
  }
}

TEST_CASE("batch sizes at the edges: one batch larger than the dataset, exact multiples, empty datasets") {
  const auto data = numbered(6);
  DataLoader whole(data, {.batch = 100});
  CHECK(whole.size() == 1);
  CHECK(run(whole, data).sizes == std::vector<int>{6});
  DataLoader dropped(data, {.batch = 100, .drop_last = true});
  CHECK(dropped.size() == 0);
  CHECK(run(dropped, data).ids.empty());
  DataLoader exact(data, {.batch = 2, .drop_last = true});
  CHECK(run(exact, data).sizes == std::vector<int>{2, 2, 2});
  const Dataset<Row> empty;
  DataLoader none(empty, {.batch = 4, .shuffle = true});
  CHECK(none.size() == 0);
  CHECK(none.begin() == none.end());
  CHECK_THROWS_AS(DataLoader(data, {.batch = 0}), etnn::ShapeError);
}

TEST_CASE("the shuffled order depends only on (seed, epoch)") {
  const auto data = numbered(50);
  DataLoader a(data, {.batch = 8, .shuffle = true, .seed = 42});
  DataLoader b(data, {.batch = 8, .shuffle = true, .seed = 42, .prefetch = false});
  DataLoader other_seed(data, {.batch = 8, .shuffle = true, .seed = 43});
  a.set_epoch(3);
  b.set_epoch(3);
  other_seed.set_epoch(3);
  const Epoch first = run(a, data);
  CHECK(run(a, data) == first);  // iterating twice in one epoch repeats it
  CHECK(run(b, data) == first);
  CHECK(run(other_seed, data).ids != first.ids);
  a.set_epoch(4);
  CHECK(run(a, data).ids != first.ids);
  a.set_epoch(3);
  CHECK(run(a, data) == first);
}

TEST_CASE("the random stream is pinned: the same order on every platform and standard library") {
  std::uint64_t state = 0;
  CHECK(etnn::splitmix64(state) == 0xE220A8397B1DCDAFull);  // the reference implementation's first value
  CHECK(etnn::splitmix64(state) == 0x6E789E6AA1B965F4ull);
  std::vector<std::size_t> order(10);
  etnn::data::RandomSampler{.seed = 0}.fill(10, 0, order);
  CHECK(order == std::vector<std::size_t>{5, 3, 8, 2, 0, 6, 7, 1, 4, 9});  // also computed by an independent Python model
}

TEST_CASE("prefetch on and off give identical batches") {
  const auto data = numbered(103);
  for (bool shuffle : {false, true}) {
    DataLoader on(data, {.batch = 10, .shuffle = shuffle, .seed = 9, .prefetch = true});
    DataLoader off(data, {.batch = 10, .shuffle = shuffle, .seed = 9, .prefetch = false});
    for (int e = 0; e < 2; ++e) {
      on.set_epoch(e);
      off.set_epoch(e);
      CHECK(run(on, data) == run(off, data));
    }
  }
}

TEST_CASE("an in-memory dataset is gathered on the caller unless prefetch is asked for") {
  const auto data = numbered(103);
  DataLoader automatic(data, {.batch = 10, .shuffle = true, .seed = 9});
  DataLoader on(data, {.batch = 10, .shuffle = true, .seed = 9, .prefetch = true});
  DataLoader off(data, {.batch = 10, .shuffle = true, .seed = 9, .prefetch = false});
  CHECK(on.prefetches());
  CHECK_FALSE(off.prefetches());
  const int threads = etnn::num_threads();
  for (const int t : {1, etnn::usable_cpus() + 1}) {
    etnn::set_num_threads(t);  // without threads in the build, num_threads() stays 1
    CHECK_FALSE(automatic.prefetches());
    automatic.set_epoch(t);
    on.set_epoch(t);
    CHECK(run(automatic, data) == run(on, data));  // either way, the same batches
  }
  etnn::set_num_threads(threads);
}

TEST_CASE("a large batch gathered on several threads is the batch one thread gathers") {
  // Batches of 256 x 784 floats: over the size at which rows are copied on etnn's threads.
  // Sample i's row starts with i, then values of its own; its label is i % 10.
  using Image = etnn::Shape<784>;
  constexpr std::size_t n = 600;
  std::vector<float> x(n * Image::size);
  std::vector<int> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i * Image::size] = static_cast<float>(i);
    for (std::size_t j = 1; j < Image::size; ++j) x[i * Image::size + j] = static_cast<float>((i * 31 + j) % 9973);
    y[i] = static_cast<int>(i % 10);
  }
  const Dataset<Image> data(std::move(x), std::move(y));
  const auto batches_on = [&](int t) {
    etnn::set_num_threads(t);  // without threads in the build, num_threads() stays 1
    DataLoader loader(data, {.batch = 256, .shuffle = true, .seed = 4});
    std::vector<float> xs;
    std::vector<int> ys;
    for (auto batch : loader) {
      xs.insert(xs.end(), batch.x.data(), batch.x.data() + batch.x.size());
      ys.insert(ys.end(), batch.y.begin(), batch.y.end());
    }
    return std::pair{xs, ys};
  };
  const int threads = etnn::num_threads();
  const auto one = batches_on(1);
  REQUIRE(one.first.size() == n * Image::size);
  std::vector<int> seen(n, 0);
  for (std::size_t r = 0; r < n; ++r) {
    const float* row = one.first.data() + r * Image::size;
    const auto id = static_cast<std::size_t>(row[0]);
    REQUIRE(id < n);
    ++seen[id];
    CHECK(std::equal(row, row + Image::size, data.sample(id)));
    CHECK(one.second[r] == data.label(id));
  }
  CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(n));
  for (const int t : {2, 3}) CHECK(batches_on(t) == one);
  etnn::set_num_threads(threads);
}

TEST_CASE("breaking out of a loop early, then iterating again, restarts the epoch cleanly") {
  const auto data = numbered(40);
  for (bool prefetch : {false, true}) {
    CAPTURE(prefetch);
    DataLoader loader(data, {.batch = 4, .shuffle = true, .seed = 1, .prefetch = prefetch});
    const Epoch full = run(loader, data);
    for (int stop_after : {0, 1, 2, 5, 9}) {
      int seen = 0;
      for (auto batch : loader) {
        CHECK(batch.x.batch() == 4);
        if (seen++ == stop_after) break;
      }
      CHECK(run(loader, data) == full);
    }
    {
      DataLoader abandoned(data, {.batch = 4, .prefetch = prefetch});
      for (auto batch : abandoned) {
        (void)batch;
        break;
      }
    }  // destroyed after an early exit: nothing hangs
  }
}

TEST_CASE("a new begin() ends the previous iteration; its iterator refuses to advance") {
  const auto data = numbered(20);
  DataLoader loader(data, {.batch = 4});
  auto old = loader.begin();
  auto current = loader.begin();
  CHECK_THROWS_AS(++old, etnn::Error);
  CHECK((*current).x(0, 0) == 0.0f);
  ++current;
  CHECK((*current).x(0, 0) == 4.0f);
}

TEST_CASE("an exception while gathering reaches the caller, with or without the worker thread") {
  for (std::size_t bad : {0, 7}) {  // sample 0 fails inside begin(), sample 7 in batch 2
    FailingDataset failing;
    failing.bad = bad;
    for (bool prefetch : {false, true}) {
      CAPTURE(bad);
      CAPTURE(prefetch);
      DataLoader loader(failing, {.batch = 3, .prefetch = prefetch});
      for (int attempt = 0; attempt < 2; ++attempt) {
        int delivered = 0;
        CHECK_THROWS_WITH_AS(
            [&] {
              for (auto batch : loader) delivered += batch.x.batch();
            }(),
            "unreadable sample", std::runtime_error);
        CHECK(delivered == static_cast<int>(bad / 3 * 3));  // the batches before the failing one
      }
    }
  }
}

TEST_CASE("iterating allocates nothing per batch") {
  const auto data = numbered(1000);
  for (bool prefetch : {false, true}) {
    CAPTURE(prefetch);
    DataLoader loader(data, {.batch = 7, .shuffle = true, .prefetch = prefetch});
    for (int e = 0; e < 2; ++e) {
      loader.set_epoch(e);
      auto it = loader.begin();
      const long before = allocations.load();
      double sum = 0;
      for (; it != loader.end(); ++it) sum += (*it).x(0, 0);
      const long during = allocations.load() - before;
      CHECK(during == 0);
      CHECK(sum > 0);
    }
  }
}

TEST_CASE("Dataset validates its inputs and copies subsets") {
  CHECK_THROWS_WITH_AS(Dataset<Row>(std::vector<float>(7), std::vector<int>(2)),
                       doctest::Contains("7 feature values for 2 labels"), etnn::ShapeError);
  CHECK_THROWS_WITH_AS(Dataset<Row>(std::vector<float>(6), std::vector<int>{0, -1}),
                       doctest::Contains("label 1 is -1"), etnn::ShapeError);
  const auto data = numbered(10);
  CHECK(data.num_classes() == 5);
  const auto part = data.subset(6, 3);
  REQUIRE(part.size() == 3);
  CHECK(part.sample(0)[0] == 6.0f);
  CHECK(part.label(2) == 3);
  CHECK(part.num_classes() == 4);
  CHECK(data.subset(10, 0).size() == 0);
  CHECK_THROWS_AS(data.subset(8, 3), etnn::ShapeError);
  CHECK_THROWS_AS(data.subset(11, 0), etnn::ShapeError);
}

TEST_CASE("mean, stddev and normalize match transforms.Normalize") {
  // Values 1, 2, 3, 4: mean 2.5, population std sqrt(1.25).
  Dataset<etnn::Shape<2>> data({1, 2, 3, 4}, {0, 1});
  CHECK(etnn::data::mean(data) == doctest::Approx(2.5));
  CHECK(etnn::data::stddev(data) == doctest::Approx(std::sqrt(1.25)));
  data.normalize(2.5f, 0.5f);
  const std::vector<float> expected{-3.0f, -1.0f, 1.0f, 3.0f};
  CHECK(std::equal(expected.begin(), expected.end(), data.features().begin()));
  data.normalize(static_cast<float>(etnn::data::mean(data)), static_cast<float>(etnn::data::stddev(data)));
  CHECK(etnn::data::mean(data) == doctest::Approx(0.0));
  CHECK(etnn::data::stddev(data) == doctest::Approx(1.0));
  CHECK_THROWS_AS(data.normalize(0.0f, 0.0f), etnn::Error);
  CHECK_THROWS_AS(etnn::data::mean(Dataset<etnn::Shape<2>>()), etnn::Error);
}

namespace {
// A dataset whose rows are slow to read on the thread that built it: the caller then often
// gathers a batch itself while the worker gathers the next one, and the worker may finish first.
struct SlowOnCaller {
  using shape = Row;
  const Dataset<Row>* data;
  std::thread::id caller = std::this_thread::get_id();
  std::size_t size() const { return data->size(); }
  const float* sample(std::size_t i) const {
    if (std::this_thread::get_id() == caller) std::this_thread::sleep_for(std::chrono::microseconds(300));
    return data->sample(i);
  }
  int label(std::size_t i) const { return data->label(i); }
};
}  // namespace

TEST_CASE("prefetch: the caller and the worker gathering neighbouring batches never lose or reorder one") {
  const auto data = numbered(30);  // batches of 4, the last one of 2
  SlowOnCaller slow{&data};
  DataLoader with_prefetch(slow, {.batch = 4, .shuffle = true, .seed = 1, .prefetch = true});
  DataLoader without(data, {.batch = 4, .shuffle = true, .seed = 1, .prefetch = false});
  for (int epoch = 0; epoch < 20; ++epoch) {
    with_prefetch.set_epoch(epoch);
    without.set_epoch(epoch);
    std::vector<float> got, expected;
    for (auto batch : with_prefetch) got.insert(got.end(), batch.x.data(), batch.x.data() + batch.x.size());
    for (auto batch : without) expected.insert(expected.end(), batch.x.data(), batch.x.data() + batch.x.size());
    REQUIRE(got == expected);
  }
}

namespace {
// Each rank's indices for one epoch, as torch.utils.data.DistributedSampler defines them.
std::vector<std::vector<std::size_t>> shares(std::size_t n, int ranks, etnn::data::DistributedSamplerOptions options,
                                             int epoch) {
  std::vector<std::vector<std::size_t>> out;
  for (int r = 0; r < ranks; ++r) {
    const etnn::data::DistributedSampler sampler(r, ranks, options);
    std::vector<std::size_t> order(sampler.num_samples(n));
    sampler.fill(n, epoch, order);
    out.push_back(order);
  }
  return out;
}
}  // namespace

TEST_CASE("DistributedSampler: disjoint strided shares that cover the data, padded or cut like PyTorch's") {
  // 10 samples on 3 ranks without shuffling: [0..9] padded with 0, 1 -> rank r takes r, r + 3, ...
  auto s = shares(10, 3, {.shuffle = false}, 0);
  CHECK(s[0] == std::vector<std::size_t>{0, 3, 6, 9});
  CHECK(s[1] == std::vector<std::size_t>{1, 4, 7, 0});
  CHECK(s[2] == std::vector<std::size_t>{2, 5, 8, 1});
  // drop_last: ceil((10 - 3) / 3) = 3 each, the tail 9 dropped.
  s = shares(10, 3, {.shuffle = false, .drop_last = true}, 0);
  CHECK(s[0] == std::vector<std::size_t>{0, 3, 6});
  CHECK(s[2] == std::vector<std::size_t>{2, 5, 8});
  // Fewer samples than ranks: padding repeats the order as often as needed.
  s = shares(2, 5, {.shuffle = false}, 0);
  for (int r = 0; r < 5; ++r) CHECK(s[static_cast<std::size_t>(r)] == std::vector<std::size_t>{static_cast<std::size_t>(r % 2)});
  CHECK(shares(2, 5, {.drop_last = true}, 0)[0].empty());

  for (std::size_t n : {std::size_t{97}, std::size_t{100}}) {
    for (int ranks : {1, 2, 4, 7}) {
      for (bool drop_last : {false, true}) {
        const auto e0 = shares(n, ranks, {.shuffle = true, .seed = 9, .drop_last = drop_last}, 0);
        std::vector<int> seen(n, 0);
        for (const auto& share : e0) {
          REQUIRE(share.size() == e0[0].size());
          for (std::size_t i : share) ++seen[i];
        }
        const std::size_t total = e0[0].size() * static_cast<std::size_t>(ranks);
        const auto covered = static_cast<std::size_t>(std::count_if(seen.begin(), seen.end(), [](int c) { return c > 0; }));
        const auto repeated = static_cast<std::size_t>(std::count_if(seen.begin(), seen.end(), [](int c) { return c > 1; }));
        if (drop_last) {
          CHECK(total <= n);
          CHECK(total + static_cast<std::size_t>(ranks) > n);
          CHECK(covered == total);  // disjoint
        } else {
          CHECK(covered == n);                 // every sample
          CHECK(repeated == total - n);        // only the padding repeats
          CHECK(total - n < static_cast<std::size_t>(ranks));
        }
        // A new epoch, a new order; one rank alone sees RandomSampler's order.
        CHECK(shares(n, ranks, {.shuffle = true, .seed = 9, .drop_last = drop_last}, 1) != e0);
      }
    }
    std::vector<std::size_t> random(n);
    etnn::data::RandomSampler{.seed = 9}.fill(n, 2, random);
    CHECK(shares(n, 1, {.seed = 9}, 2)[0] == random);
  }
  CHECK_THROWS_AS(etnn::data::DistributedSampler(3, 3), etnn::Error);
}

TEST_CASE("DataLoader with a DistributedSampler iterates this rank's share") {
  const auto data = numbered(23);
  struct World {
    int rank() const { return 1; }
    int size() const { return 3; }
  };
  DataLoader loader(data, {.batch = 4, .sampler = etnn::data::DistributedSampler(World{}, {.shuffle = false})});
  CHECK(loader.size() == 2);  // ceil(23 / 3) = 8 samples: batches of 4 and 4
  std::vector<float> ids;
  for (auto batch : loader)
    for (int r = 0; r < batch.x.batch(); ++r) ids.push_back(batch.x.sample(r)[0]);
  CHECK(ids == std::vector<float>{1, 4, 7, 10, 13, 16, 19, 22});
}
