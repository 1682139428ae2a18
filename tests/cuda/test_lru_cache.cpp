// The eviction policy of the CUDA graph cache (cuda/lru_cache.hpp, under cuda::GraphCache), on the
// host: least recently used out first, never more than the capacity, a key evicted and asked for
// again is recorded again, and every value (a cudaGraphExec_t in GraphCache) is released exactly
// once, whether evicted, replaced, cleared or left to the destructor.
#include <doctest/doctest.h>

#include <etnn/cuda/lru_cache.hpp>

#include <cstddef>
#include <map>
#include <stdexcept>
#include <tuple>

namespace {

// Stands in for cudaGraphExecDestroy: counts the releases of each handle.
struct CountReleases {
  std::map<int, int>* released;
  void operator()(int handle) const { ++(*released)[handle]; }
};

using Key = std::tuple<int, int, const void*>;  // GraphCache's key: (part, batch, input)
using Cache = etnn::cuda::LruCache<Key, int, CountReleases>;

// GraphCache::run's lookup: the cached handle, else a newly "recorded" one (handles 1, 2, ...).
struct Recorder {
  Cache& cache;
  int recorded = 0;
  int run(const Key& key) {
    if (const int* handle = cache.find(key)) return *handle;
    return cache.insert(key, ++recorded);
  }
};

Key key(int input) {
  static const float data[64] = {};
  return {0, 32, data + input};  // forward at batch 32, input at an offset view of one buffer
}

// Every handle 1..made released exactly once, none other.
void check_each_released_once(const std::map<int, int>& released, int made) {
  CHECK(released.size() == static_cast<std::size_t>(made));
  for (int h = 1; h <= made; ++h) {
    INFO("handle ", h);
    const auto at = released.find(h);
    REQUIRE(at != released.end());
    CHECK(at->second == 1);
  }
}

}  // namespace

TEST_CASE("LRU cache: the least recently used goes first, never more than the capacity") {
  std::map<int, int> released;
  {
    Cache cache(3, CountReleases{&released});
    Recorder graphs{cache};
    CHECK(graphs.run(key(1)) == 1);
    CHECK(graphs.run(key(2)) == 2);
    CHECK(graphs.run(key(3)) == 3);
    CHECK(graphs.run(key(1)) == 1);  // a hit, now the most recent: order 1, 3, 2
    CHECK(released.empty());
    CHECK(graphs.run(key(4)) == 4);  // evicts 2
    CHECK(cache.size() == 3);
    CHECK(cache.evictions() == 1);
    CHECK(released == std::map<int, int>{{2, 1}});
    CHECK(cache.find(key(2)) == nullptr);
    CHECK(graphs.run(key(3)) == 3);  // order 3, 4, 1
    CHECK(graphs.run(key(5)) == 5);  // evicts 1
    CHECK(released == std::map<int, int>{{1, 1}, {2, 1}});
    CHECK(cache.find(key(4)) != nullptr);
    CHECK(cache.find(key(3)) != nullptr);
    CHECK(cache.find(key(5)) != nullptr);
    CHECK(cache.size() == cache.capacity());
  }
  check_each_released_once(released, 5);  // 3, 4 and 5 by the destructor
}

TEST_CASE("LRU cache: offset views of one buffer record a graph per step, held to the capacity") {
  std::map<int, int> released;
  Cache cache(16, CountReleases{&released});
  Recorder graphs{cache};
  for (int step = 0; step < 40; ++step) {
    graphs.run(key(step));
    CHECK(cache.size() == static_cast<std::size_t>(step < 16 ? step + 1 : 16));
  }
  CHECK(graphs.recorded == 40);
  CHECK(cache.evictions() == 24);
  // Steps that come back to a held input replay; an evicted one records again.
  graphs.run(key(39));
  graphs.run(key(24));
  CHECK(graphs.recorded == 40);
  CHECK(graphs.run(key(0)) == 41);  // evicted at step 16: recorded again, evicting 25
  CHECK(cache.find(key(25)) == nullptr);
  CHECK(cache.find(key(24)) != nullptr);  // used again above, so kept
  CHECK(cache.evictions() == 25);
  cache.clear();
  CHECK(cache.size() == 0);
  CHECK(cache.evictions() == 25);  // clearing is not evicting
  check_each_released_once(released, 41);
  CHECK(graphs.run(key(7)) == 42);  // after clear(), everything records again
  cache.clear();
  check_each_released_once(released, 42);
}

TEST_CASE("LRU cache: inserting a held key releases the value it replaces") {
  std::map<int, int> released;
  {
    Cache cache(2, CountReleases{&released});
    cache.insert(key(0), 1);
    cache.insert(key(1), 2);
    cache.insert(key(0), 3);  // replaces 1; key 0 is now the most recent
    CHECK(released == std::map<int, int>{{1, 1}});
    CHECK(cache.size() == 2);
    CHECK(*cache.find(key(0)) == 3);
    cache.insert(key(2), 4);  // evicts key 1 (value 2)
    CHECK(released == std::map<int, int>{{1, 1}, {2, 1}});
    CHECK(cache.evictions() == 1);
  }
  check_each_released_once(released, 4);
}

TEST_CASE("LRU cache: a capacity of zero is refused") {
  std::map<int, int> released;
  CHECK_THROWS_AS(Cache(0, CountReleases{&released}), std::invalid_argument);
}
