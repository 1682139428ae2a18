// C += A B against a naive triple loop, for every operand layout, sizes below and above the
// threading threshold, and splits along rows and along columns.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "support/gradcheck.hpp"

using etnn::cpu::Layout;

namespace {
template <Layout L>
double element(const std::vector<double>& m, int ld, int i, int j) {
  return L == Layout::row_major ? m[static_cast<std::size_t>(i * ld + j)] : m[static_cast<std::size_t>(j * ld + i)];
}

template <Layout LA, Layout LB>
void check(int m, int n, int k) {
  const int lda = LA == Layout::row_major ? k : m;
  const int ldb = LB == Layout::row_major ? n : k;
  std::vector<double> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n)),
      c(static_cast<std::size_t>(m * n));
  etnn::test::fill_uniform(a.data(), a.size(), 1);
  etnn::test::fill_uniform(b.data(), b.size(), 2);
  etnn::test::fill_uniform(c.data(), c.size(), 3);
  std::vector<double> expected = c;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p)
        expected[static_cast<std::size_t>(i * n + j)] += element<LA>(a, lda, i, p) * element<LB>(b, ldb, p, j);
  etnn::cpu::gemm_accumulate<LA, LB>(m, n, k, a.data(), lda, b.data(), ldb, c.data(), n);
  for (std::size_t i = 0; i < c.size(); ++i) REQUIRE(c[i] == doctest::Approx(expected[i]).epsilon(1e-12));
}

template <Layout LA, Layout LB>
void check_sizes() {
  check<LA, LB>(1, 1, 1);
  check<LA, LB>(3, 5, 7);
  check<LA, LB>(64, 10, 512);    // a classifier head
  check<LA, LB>(300, 70, 33);    // threaded, split along rows
  check<LA, LB>(20, 400, 100);   // threaded, split along columns
}
}  // namespace

TEST_CASE("gemm_accumulate: row-major A, row-major B") { check_sizes<Layout::row_major, Layout::row_major>(); }
TEST_CASE("gemm_accumulate: row-major A, column-major B") { check_sizes<Layout::row_major, Layout::col_major>(); }
TEST_CASE("gemm_accumulate: column-major A, row-major B") { check_sizes<Layout::col_major, Layout::row_major>(); }
TEST_CASE("gemm_accumulate: column-major A, column-major B") { check_sizes<Layout::col_major, Layout::col_major>(); }

TEST_CASE("chunks partition [0, n) for any thread count") {
  for (std::size_t threads = 1; threads <= 64; ++threads) {
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{129}, std::size_t{130}, std::size_t{1000}}) {
      for (std::size_t grain : {std::size_t{1}, std::size_t{8}, std::size_t{16}}) {
        const std::size_t chunks = etnn::cpu::chunk_count(n, grain, threads);
        REQUIRE(chunks >= 1);
        REQUIRE(chunks <= threads);
        std::size_t expected_begin = 0;
        for (std::size_t c = 0; c < chunks; ++c) {
          const auto chunk = etnn::cpu::chunk_bounds(n, chunks, c);
          REQUIRE(chunk.begin == expected_begin);
          REQUIRE(chunk.end > chunk.begin);
          if (chunks > 1) REQUIRE(chunk.end - chunk.begin >= grain);
          expected_begin = chunk.end;
        }
        REQUIRE(expected_begin == n);
      }
    }
  }
}

#if defined(_OPENMP)
TEST_CASE("gemm_accumulate with more threads than cores and awkward sizes") {
  const int saved = etnn::num_threads();
  etnn::set_num_threads(16);
  for (int m = 129; m <= 134; ++m) check<Layout::row_major, Layout::col_major>(m, 10, 512);
  check<Layout::col_major, Layout::row_major>(10, 1030, 64);
  etnn::set_num_threads(saved);
}
#endif

TEST_CASE("an exception thrown in a parallel chunk reaches the caller") {
  CHECK_THROWS_WITH(etnn::cpu::parallel_chunks(1 << 20, 1, 1, [](std::size_t begin, std::size_t) {
                      if (begin > 0 || etnn::num_threads() == 1) throw std::runtime_error("chunk failed");
                    }),
                    "chunk failed");
}
