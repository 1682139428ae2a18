// The grid-stride loop of every elementwise and index kernel (cuda/grid_stride.hpp), on the host:
// its index math run over an emulated grid (every block, every thread) visits each index of
// [begin, end) exactly once and nothing else, for grids much smaller than the items and item
// counts that are a multiple of nothing; and grid_blocks' capped grid, the one the launches get,
// still reaches the tail past 2^28 items that one item per thread would leave untouched.
#include <doctest/doctest.h>

#include <etnn/cuda/grid_stride.hpp>
#include <etnn/etnn.hpp>

#include <cstddef>
#include <vector>

using etnn::cuda::grid_blocks;
using etnn::cuda::GridStride;

namespace {

// visits[i] = how often the emulated grid (blocks x threads) visits index i of [0, end); the
// last element counts the visits outside [begin, end).
std::vector<int> visits_of(std::size_t blocks, std::size_t threads, std::size_t begin, std::size_t end) {
  std::vector<int> visits(end + 1, 0);
  for (std::size_t block = 0; block < blocks; ++block)
    for (std::size_t thread = 0; thread < threads; ++thread)
      for (const std::size_t i : GridStride(block * threads + thread, blocks * threads, begin, end))
        ++visits[i >= begin && i < end ? i : end];
  return visits;
}

}  // namespace

TEST_CASE("grid stride: each index of [begin, end) exactly once, whatever the grid") {
  struct Grid {
    std::size_t blocks, threads;
  };
  for (const Grid grid : {Grid{1, 1}, Grid{1, 32}, Grid{3, 7}, Grid{7, 96}, Grid{13, 256}})
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{97}, std::size_t{10007},
                                std::size_t{100003}}) {
      for (const std::size_t begin : {std::size_t{0}, n / 3}) {
        INFO("grid ", grid.blocks, " x ", grid.threads, ", [", begin, ", ", n, ")");
        const std::vector<int> visits = visits_of(grid.blocks, grid.threads, begin, n);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < n; ++i) wrong += visits[i] != (i < begin ? 0 : 1);
        CHECK(wrong == 0);
        CHECK(visits[n] == 0);  // nothing outside [begin, n)
      }
    }
}

TEST_CASE("grid stride: a grid larger than the items leaves the extra threads idle") {
  std::vector<int> visits = visits_of(4, 256, 0, 37);
  CHECK(visits.back() == 0);
  visits.pop_back();
  CHECK(visits == std::vector<int>(37, 1));
}

TEST_CASE("grid_blocks: one item per thread up to 2^28 items, then a capped grid") {
  CHECK(grid_blocks(0) == 1);  // still a valid launch
  CHECK(grid_blocks(1) == 1);
  CHECK(grid_blocks(256) == 1);
  CHECK(grid_blocks(257) == 2);
  CHECK(grid_blocks(1000, 128) == 8);
  constexpr std::size_t cap_items = etnn::cuda::max_grid_blocks * 256;  // 2^28
  static_assert(cap_items == std::size_t{1} << 28);
  CHECK(grid_blocks(cap_items) == etnn::cuda::max_grid_blocks);
  CHECK(grid_blocks(cap_items + 1) == etnn::cuda::max_grid_blocks);
  CHECK(grid_blocks(std::size_t{1} << 40) == etnn::cuda::max_grid_blocks);
}

TEST_CASE("grid stride: the capped grid reaches the tail past 2^28 items") {
  // copy_columns at width 128 and batch 2^21 + 12345: n = 2^28 + 1580160 items, a grid of
  // 2^28 threads. Thread t visits t and t + 2^28 (when < n): the threads that reach the tail.
  const std::size_t n = std::size_t{128} * ((std::size_t{1} << 21) + 12345);
  const std::size_t threads = std::size_t{grid_blocks(n)} * 256;
  REQUIRE(threads == std::size_t{1} << 28);
  const std::size_t tail = n - threads;
  std::vector<int> tail_visits(tail, 0);
  std::size_t wrong_counts = 0;
  for (std::size_t t = 0; t < tail + 1000; ++t) {
    std::size_t count = 0;
    for (const std::size_t i : GridStride(t, threads, 0, n)) {
      ++count;
      if (i >= threads) ++tail_visits[i - threads];
    }
    wrong_counts += count != (t < tail ? 2u : 1u);
  }
  CHECK(wrong_counts == 0);
  std::size_t not_once = 0;
  for (int v : tail_visits) not_once += v != 1;
  CHECK(not_once == 0);
}

TEST_CASE("grid stride: the column copy of the padded fused MLP over an emulated small grid") {
  // copy_columns_kernel's body, (rows, 20) -> (rows, 32) and back, on a 5 x 64 grid.
  const int rows = 1001;
  std::vector<float> x(static_cast<std::size_t>(rows) * 20);
  for (std::size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k) + 0.5f;
  std::vector<float> padded(static_cast<std::size_t>(rows) * 32, -1.0f), back(x.size(), -1.0f);
  const auto copy = [](const float* from, int from_cols, float* to, int to_cols, std::size_t n) {
    for (std::size_t thread = 0; thread < 5 * 64; ++thread)
      for (const std::size_t index : GridStride(thread, 5 * 64, 0, n))
        to[index] = etnn::expr::detail::column_copy_element(from, from_cols, to_cols, index);
  };
  copy(x.data(), 20, padded.data(), 32, padded.size());
  copy(padded.data(), 32, back.data(), 20, back.size());
  CHECK(back == x);
  std::size_t wrong_padding = 0;
  for (std::size_t k = 0; k < padded.size(); ++k)
    if (k % 32 >= 20) wrong_padding += padded[k] != 0.0f;
  CHECK(wrong_padding == 0);
}
