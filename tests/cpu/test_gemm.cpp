// C = A B and C += A B against a naive triple loop, in float and double, for every operand
// layout, sizes below and above the threading threshold, splits along rows and along columns,
// and the epilogue's one visit of every element; the packed kernels' thread independence.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/gradcheck.hpp"

using etnn::cpu::Layout;

namespace {
template <Layout L, class T>
double element(const std::vector<T>& m, int ld, int i, int j) {
  return static_cast<double>(L == Layout::row_major ? m[static_cast<std::size_t>(i * ld + j)]
                                                   : m[static_cast<std::size_t>(j * ld + i)]);
}

// Operands with leading dimensions past their widths, so that a product writing outside its
// block or reading the wrong stride shows.
template <Layout LA, Layout LB, class T>
struct Product {
  int m, n, k;
  int lda = (LA == Layout::row_major ? k : m) + 3;
  int ldb = (LB == Layout::row_major ? n : k) + 2;
  int ldc = n + 1;
  std::vector<T> a, b, c;

  Product(int m_, int n_, int k_) : m(m_), n(n_), k(k_) {
    a.resize(static_cast<std::size_t>(lda) * (LA == Layout::row_major ? m : k));
    b.resize(static_cast<std::size_t>(ldb) * (LB == Layout::row_major ? k : n));
    c.resize(static_cast<std::size_t>(ldc) * m);
    etnn::test::fill_uniform(a.data(), a.size(), 1);
    etnn::test::fill_uniform(b.data(), b.size(), 2);
    etnn::test::fill_uniform(c.data(), c.size(), 3);
  }
  double expected(const std::vector<T>& c0, bool accumulate, int i, int j) const {
    double sum = accumulate ? static_cast<double>(c0[static_cast<std::size_t>(i * ldc + j)]) : 0.0;
    for (int p = 0; p < k; ++p) sum += element<LA>(a, lda, i, p) * element<LB>(b, ldb, p, j);
    return sum;
  }
};

// Counts the epilogue's visits of each element of C.
struct CountingEpilogue {
  std::vector<int>* visits;
  int ldc;
  void operator()(int r0, int r1, int c0, int c1) const noexcept {
    for (int r = r0; r < r1; ++r)
      for (int j = c0; j < c1; ++j) ++(*visits)[static_cast<std::size_t>(r * ldc + j)];
  }
};

// etnn's GEMM as layers call it, on the engine this process chose.
struct PublicGemm {
  template <Layout LA, Layout LB, class T>
  void run(etnn::cpu::Accumulate accumulate, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c,
           int ldc, CountingEpilogue epilogue) const {
    etnn::cpu::gemm<LA, LB>(accumulate, m, n, k, a, lda, b, ldb, c, ldc, epilogue);
  }
};

template <Layout LA, Layout LB, class T, class Gemm = PublicGemm>
void check(int m, int n, int k, etnn::cpu::Accumulate accumulate, Gemm gemm = {}) {
  Product<LA, LB, T> p(m, n, k);
  const std::vector<T> c0 = p.c;
  std::vector<int> visits(p.c.size(), 0);
  gemm.template run<LA, LB>(accumulate, m, n, k, p.a.data(), p.lda, p.b.data(), p.ldb, p.c.data(), p.ldc,
                            CountingEpilogue{&visits, p.ldc});
  // float: k products of values in [-1, 1], each rounded once, summed in some order
  const double tolerance = std::is_same_v<T, float> ? 4e-7 * (k + 2) : 1e-12;
  const bool adds = accumulate == etnn::cpu::Accumulate::yes;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < p.ldc; ++j) {
      const auto at = static_cast<std::size_t>(i * p.ldc + j);
      if (j >= n) {
        REQUIRE(p.c[at] == c0[at]);  // past the block: untouched
        REQUIRE(visits[at] == 0);
        continue;
      }
      REQUIRE(visits[at] == 1);
      REQUIRE(static_cast<double>(p.c[at]) == doctest::Approx(p.expected(c0, adds, i, j)).epsilon(tolerance));
    }
  }
}

template <Layout LA, Layout LB, class T, class Gemm = PublicGemm>
void check_sizes(Gemm gemm = {}) {
  for (const auto accumulate : {etnn::cpu::Accumulate::no, etnn::cpu::Accumulate::yes}) {
    check<LA, LB, T>(1, 1, 1, accumulate, gemm);
    check<LA, LB, T>(3, 5, 7, accumulate, gemm);
    check<LA, LB, T>(7, 17, 300, accumulate, gemm);   // remainders of every register tile, two K blocks
    check<LA, LB, T>(64, 10, 512, accumulate, gemm);  // a classifier head
    check<LA, LB, T>(300, 70, 33, accumulate, gemm);  // threaded, split along rows
    check<LA, LB, T>(20, 400, 100, accumulate, gemm); // threaded, split along columns
    check<LA, LB, T>(8, 600, 520, accumulate, gemm);  // at most 8 rows (B read in place when column-major), threaded
    check<LA, LB, T>(200, 700, 300, accumulate, gemm); // two bands of columns even on 1 thread: a column-major A packed whole
    check<LA, LB, T>(5, 3, 0, accumulate, gemm);      // empty depth: C = 0, or C unchanged
  }
}
}  // namespace

TEST_CASE_TEMPLATE("gemm: row-major A, row-major B", T, float, double) {
  check_sizes<Layout::row_major, Layout::row_major, T>();
}
TEST_CASE_TEMPLATE("gemm: row-major A, column-major B", T, float, double) {
  check_sizes<Layout::row_major, Layout::col_major, T>();
}
TEST_CASE_TEMPLATE("gemm: column-major A, row-major B", T, float, double) {
  check_sizes<Layout::col_major, Layout::row_major, T>();
}
TEST_CASE_TEMPLATE("gemm: column-major A, column-major B", T, float, double) {
  check_sizes<Layout::col_major, Layout::col_major, T>();
}

TEST_CASE("the float GEMM engine is chosen from the CPU at run time") {
  MESSAGE("float GEMM engine: ", std::string(etnn::cpu::gemm_engine_name(etnn::cpu::float_gemm_engine())));
#if ETNN_PACKED_GEMM
  const std::string forced = std::getenv("ETNN_CPU_GEMM") != nullptr ? std::getenv("ETNN_CPU_GEMM") : "";
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  using etnn::cpu::GemmEngine;
  const GemmEngine expected = forced == "eigen"                                  ? GemmEngine::eigen
                              : forced == "avx2" && avx2                         ? GemmEngine::avx2
                              : __builtin_cpu_supports("avx512f")                ? GemmEngine::avx512
                              : avx2                                             ? GemmEngine::avx2
                                                                                 : GemmEngine::eigen;
  CHECK(etnn::cpu::float_gemm_engine() == expected);
#endif
}

#if ETNN_PACKED_GEMM
namespace {
// The packed GEMM on one kernel set, whichever engine this process chose.
template <class Kernels>
struct PackedGemm {
  template <Layout LA, Layout LB, class T>
  void run(etnn::cpu::Accumulate accumulate, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c,
           int ldc, CountingEpilogue epilogue) const {
    if (k == 0) {  // the packed GEMM's callers (cpu/gemm.hpp) take empty depths themselves
      etnn::cpu::gemm<LA, LB>(accumulate, m, n, k, a, lda, b, ldb, c, ldc, epilogue);
      return;
    }
    etnn::cpu::packed::gemm<Kernels, LA, LB>(etnn::cpu::available_threads(), m, n, k, a, lda, b, ldb, c, ldc,
                                             accumulate == etnn::cpu::Accumulate::yes, epilogue);
  }
};

// Runs check(Kernels{}) for each kernel set this CPU runs, and says which it skips.
template <class Check>
void for_each_kernel_set(Check check) {
  if (__builtin_cpu_supports("avx512f")) check(etnn::cpu::packed::Avx512{});
  else MESSAGE("skipped: this CPU has no AVX-512");
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) check(etnn::cpu::packed::Avx2{});
  else MESSAGE("skipped: this CPU has no AVX2 and FMA");
}
}  // namespace

TEST_CASE("packed GEMM: every kernel set this CPU runs matches the naive product, in every layout") {
  for_each_kernel_set([](auto kernels) {
    using Kernels = decltype(kernels);
    CAPTURE(Kernels::nr);
    check_sizes<Layout::row_major, Layout::row_major, float>(PackedGemm<Kernels>{});
    check_sizes<Layout::row_major, Layout::col_major, float>(PackedGemm<Kernels>{});
    check_sizes<Layout::col_major, Layout::row_major, float>(PackedGemm<Kernels>{});
    check_sizes<Layout::col_major, Layout::col_major, float>(PackedGemm<Kernels>{});
  });
}

// The packed kernels' results do not depend on how many threads share the tiles: C = X W^T
// (row-major A, column-major B: A read in place) and dW = dZ^T X (column-major A, packed whole
// where bands of columns share it, by the threads together when it is large; row-major B), B
// packed whole where bands of rows share it.
namespace {
template <class Kernels, Layout LA, Layout LB>
void check_thread_independence(std::initializer_list<std::tuple<int, int, int>> sizes) {
  const auto run = [](int threads, auto& p, bool accumulate) {
    std::vector<float> c = p.c;
    etnn::cpu::NoEpilogue none;
    etnn::cpu::packed::gemm<Kernels, LA, LB>(threads, p.m, p.n, p.k, p.a.data(), p.lda, p.b.data(), p.ldb, c.data(),
                                             p.ldc, accumulate, none);
    return c;
  };
  for (const auto& [m, n, k] : sizes) {
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    Product<LA, LB, float> p(m, n, k);
    for (const bool accumulate : {false, true}) {
      const std::vector<float> one = run(1, p, accumulate);
      for (const int threads : {2, 3, 7, 16}) REQUIRE(run(threads, p, accumulate) == one);
    }
  }
}
}  // namespace

TEST_CASE("packed GEMM: bitwise the same on 1 to 16 threads") {
  for_each_kernel_set([](auto kernels) {
    using Kernels = decltype(kernels);
    CAPTURE(Kernels::nr);
    // 1000 x 256 x 300: bands of rows on more than one thread, which share a B packed whole by
    // every thread (2^16 floats or more); 1000 x 40 x 300: the caller packs it alone
    check_thread_independence<Kernels, Layout::row_major, Layout::col_major>(
        {{64, 512, 784}, {257, 2048, 300}, {8, 10, 64}, {1000, 256, 300}, {1000, 40, 300}});
    // 600 x 300: an A packed whole by every thread (2^16 floats or more)
    check_thread_independence<Kernels, Layout::col_major, Layout::row_major>(
        {{512, 784, 64}, {200, 400, 300}, {10, 512, 64}, {600, 700, 300}, {1000, 256, 300}});
  });
}

// A row of C is the same bits whatever the number of rows around it: at most 8 rows with a
// column-major B take the narrow path (B read in place), more take packed tiles, and both sum
// every element's K blocks in the same order. So a sample's output does not depend on its batch.
TEST_CASE("packed GEMM: a row of C does not depend on how many rows share the product") {
  for_each_kernel_set([](auto kernels) {
    using Kernels = decltype(kernels);
    CAPTURE(Kernels::nr);
    const auto rows_of = [](int m, auto& p, bool accumulate) {
      std::vector<float> c(p.c.begin(), p.c.begin() + static_cast<std::ptrdiff_t>(m) * p.ldc);
      etnn::cpu::NoEpilogue none;
      etnn::cpu::packed::gemm<Kernels, Layout::row_major, Layout::col_major>(
          etnn::cpu::available_threads(), m, p.n, p.k, p.a.data(), p.lda, p.b.data(), p.ldb, c.data(), p.ldc,
          accumulate, none);
      return c;
    };
    for (const auto& [n, k] : {std::pair{10, 64}, std::pair{523, 784}, std::pair{37, 1000}}) {
      CAPTURE(n);
      Product<Layout::row_major, Layout::col_major, float> p(40, n, k);
      for (const bool accumulate : {false, true}) {
        const std::vector<float> all = rows_of(40, p, accumulate);
        for (const int m : {1, 5, 8, 9, 13}) {
          CAPTURE(m);
          const std::vector<float> few = rows_of(m, p, accumulate);
          REQUIRE(std::equal(few.begin(), few.end(), all.begin()));
        }
      }
    }
  });
}

TEST_CASE("packed GEMM: tiles cover C once in near-equal whole register tiles, two or more a thread where C allows") {
  using etnn::cpu::packed::mr, etnn::cpu::packed::tile_cols, etnn::cpu::packed::kc_max;
  for (const int nr : {etnn::cpu::packed::Avx512::nr, etnn::cpu::packed::Avx2::nr}) {
    CAPTURE(nr);
    for (const int threads : {1, 2, 3, 16}) {
      for (const auto& [m, n, k] : {std::tuple{1, 1, 1}, std::tuple{8, 512, 784}, std::tuple{64, 10, 512},
                                    std::tuple{2048, 784, 64}, std::tuple{1000, 2048, 1000}, std::tuple{37, 1000, 300},
                                    std::tuple{512, 784, 64}, std::tuple{512, 2048, 64}, std::tuple{8, 784, 64}}) {
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        const auto t = etnn::cpu::packed::tiling(m, n, k, threads, nr);
        std::vector<int> covered(static_cast<std::size_t>(m) * n, 0);
        int narrowest = n, widest = 0, lowest = m, tallest = 0;
        for (int index = 0; index < t.count(); ++index) {
          const auto [r0, r1] = t.rows(index);
          const auto [c0, c1] = t.cols(index);
          REQUIRE(r0 % mr == 0);
          REQUIRE(c0 % nr == 0);
          REQUIRE(c1 - c0 <= tile_cols);
          REQUIRE((r1 == m || r1 % mr == 0));
          REQUIRE((c1 == n || c1 % nr == 0));
          for (int r = r0; r < r1; ++r)
            for (int c = c0; c < c1; ++c) ++covered[static_cast<std::size_t>(r) * n + c];
          // whole panels and register tiles of each band (the last band's last one may be partial)
          const int panels = (c1 - c0 + nr - 1) / nr, row_tiles = (r1 - r0 + mr - 1) / mr;
          narrowest = std::min(narrowest, panels), widest = std::max(widest, panels);
          lowest = std::min(lowest, row_tiles), tallest = std::max(tallest, row_tiles);
        }
        REQUIRE(std::all_of(covered.begin(), covered.end(), [](int times) { return times == 1; }));
        CHECK(widest - narrowest <= 1);
        CHECK(tallest - lowest <= 1);
        if (threads > 1 && m * n >= 2 * threads * mr * nr) REQUIRE(t.count() >= 2 * threads);
        // a shallow product gives each thread rows of its own, and tiles taken together
        // (consecutive indices) lie in different rows
        if (k <= kc_max && t.row_tiles >= 2 * threads) REQUIRE(t.down >= threads);
        for (int index = 0; index + 1 < std::min(t.down, t.count()); ++index) CHECK(t.rows(index) != t.rows(index + 1));
      }
    }
  }
}
#endif

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
TEST_CASE("gemm with more threads than cores and awkward sizes") {
  const int saved = etnn::num_threads();
  etnn::set_num_threads(16);
  for (int m = 129; m <= 134; ++m) check<Layout::row_major, Layout::col_major, float>(m, 10, 512, etnn::cpu::Accumulate::yes);
  check<Layout::col_major, Layout::row_major, double>(10, 1030, 64, etnn::cpu::Accumulate::no);
  etnn::set_num_threads(saved);
}
#endif

TEST_CASE("an exception thrown in a parallel chunk reaches the caller") {
  CHECK_THROWS_WITH(etnn::cpu::parallel_chunks(1 << 20, 1, 1, [](std::size_t begin, std::size_t) {
                      if (begin > 0 || etnn::num_threads() == 1) throw std::runtime_error("chunk failed");
                    }),
                    "chunk failed");
}
