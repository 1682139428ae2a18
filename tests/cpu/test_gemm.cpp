// C += A B against a naive triple loop, for every operand layout, sizes below and above the
// threading threshold, and splits along rows and along columns.
#include <doctest/doctest.h>

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
