#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// General matrix multiply on the CPU:  C = A B  or  C += A B, then an epilogue on C's blocks.
//   A: (M, K)   B: (K, N)   C: (M, N) row-major, leading dimension ldc
// A and B may each be row- or column-major (a transposed operand is the other layout, no copy).
//
// Floats run etnn's packed GEMM where the CPU has AVX-512 or AVX2 (cpu/packed_gemm.hpp, its kernels
// chosen at run time by cpu/features.hpp, so a portable build gets them too); other CPUs, doubles and
// ETNN_CPU_GEMM=eigen run Eigen's packed, cache-blocked kernel (gebp) for the build's instruction
// set. Two things differ from writing `C.noalias() += A * B` with Eigen maps:
//  - Packing buffers belong to the calling thread and grow to the largest product it has seen,
//    so that after the first training step a GEMM allocates nothing (Eigen allocates them for
//    every product above its 128 KiB stack limit).
//  - Threading is ours: the larger of M and N is split across etnn's threads, each running a
//    sequential GEMM on its block, when the product is large enough to pay for it.
// Either way an element's arithmetic does not depend on the thread count.
// This uses Eigen's internal GEMM entry point (Eigen 3.4: general_matrix_matrix_product).
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include <Eigen/Core>

#include "../core/device.hpp"
#include "../tensor/buffer.hpp"
#include "features.hpp"
#include "layout.hpp"
#include "packed_gemm.hpp"
#include "parallel.hpp"

#if !EIGEN_VERSION_AT_LEAST(3, 4, 0)
#error "etnn needs Eigen 3.4 or newer"
#endif

namespace etnn::cpu {

// Whether the product overwrites C or adds to it.
enum class Accumulate { no, yes };

// An epilogue that does nothing; an epilogue is called as epilogue(row_begin, row_end,
// col_begin, col_end) once per finished block of C, on the thread that computed it, and must
// not throw.
struct NoEpilogue {
  void operator()(int, int, int, int) const noexcept {}
};

namespace detail {

// Eigen's cache blocking for one product, with packing buffers taken from the calling thread's
// reusable storage instead of the heap.
template <class T>
class ReusedBlocking : public Eigen::internal::level3_blocking<T, T> {
 public:
  // rows, cols, depth of a product with a row-major result; Eigen computes it transposed, so its
  // "m" is our cols and its "n" our rows (as gemm_blocking_space does for row-major results).
  ReusedBlocking(Eigen::Index rows, Eigen::Index cols, Eigen::Index depth) {
    this->m_mc = cols;
    this->m_nc = rows;
    this->m_kc = depth;
    Eigen::internal::computeProductBlockingSizes<T, T, 1>(this->m_kc, this->m_mc, this->m_nc, Eigen::Index{1});
    thread_local Buffer<T, Cpu> packed_a;
    thread_local Buffer<T, Cpu> packed_b;
    packed_a.reserve_discard(static_cast<std::size_t>(this->m_mc * this->m_kc));
    packed_b.reserve_discard(static_cast<std::size_t>(this->m_kc * this->m_nc));
    this->m_blockA = packed_a.data();
    this->m_blockB = packed_b.data();
  }
};

constexpr int eigen_order(Layout layout) { return layout == Layout::row_major ? Eigen::RowMajor : Eigen::ColMajor; }

template <Layout LA, Layout LB, class T>
void gemm_block(Accumulate accumulate, Eigen::Index m, Eigen::Index n, Eigen::Index k, const T* a, Eigen::Index lda,
                const T* b, Eigen::Index ldb, T* c, Eigen::Index ldc) {
  if (accumulate == Accumulate::no) {
    for (Eigen::Index r = 0; r < m; ++r) std::fill_n(c + r * ldc, n, T(0));
  }
  using Product = Eigen::internal::general_matrix_matrix_product<Eigen::Index, T, eigen_order(LA), false, T,
                                                                 eigen_order(LB), false, Eigen::RowMajor, 1>;
  if (k == 0) return;
  ReusedBlocking<T> blocking(m, n, k);
  Product::run(m, n, k, a, lda, b, ldb, c, 1, ldc, T(1), blocking, nullptr);
}

}  // namespace detail

// Where threads may split a row-major GEMM result without changing any element's arithmetic: at
// multiples of Eigen's register panels (it computes the transposed product, so its nr-column
// panels are our rows and its mr-row panels our columns). A split elsewhere moves some elements
// into a remainder panel, which sums in another order: results would depend on the thread count.
template <class T>
inline constexpr std::size_t gemm_row_panel = Eigen::internal::gebp_traits<T, T>::nr;
template <class T>
inline constexpr std::size_t gemm_column_panel = Eigen::internal::gebp_traits<T, T>::mr;

// parallel_chunks over [0, n) with chunk boundaries at multiples of `panel`, each chunk at least
// `grain` indices (and one panel).
template <class F>
void parallel_panels(std::size_t n, std::size_t panel, std::size_t grain, std::size_t work_per_index, F&& f,
                     Placement placement = Placement::any_thread) {
  const std::size_t panels = (n + panel - 1) / panel;
  parallel_chunks(
      panels, std::max<std::size_t>(1, grain / panel), work_per_index * panel,
      [&](std::size_t first, std::size_t last) { f(first * panel, std::min(n, last * panel)); }, placement);
}

// Products smaller than this many multiply-adds run on one thread.
inline constexpr std::size_t gemm_parallel_threshold = std::size_t{1} << 18;

namespace detail {

// Runs the product on etnn's packed GEMM on `threads` threads when this process takes it for T
// (floats on a CPU with AVX-512 or AVX2); false leaves it to Eigen.
template <Layout LA, Layout LB, class T, class Epilogue>
bool packed_product(int threads, Accumulate accumulate, int m, int n, int k, const T* a, int lda, const T* b,
                    int ldb, T* c, int ldc, Epilogue& epilogue) {
#if ETNN_PACKED_GEMM
  if constexpr (std::is_same_v<T, float>) {
    const GemmEngine engine = float_gemm_engine();
    if (k > 0 && engine != GemmEngine::eigen) {
      const bool adds = accumulate == Accumulate::yes;
      if (engine == GemmEngine::avx512) {
        packed::gemm<packed::Avx512, LA, LB>(threads, m, n, k, a, lda, b, ldb, c, ldc, adds, epilogue);
      } else {
        packed::gemm<packed::Avx2, LA, LB>(threads, m, n, k, a, lda, b, ldb, c, ldc, adds, epilogue);
      }
      return true;
    }
  }
#endif
  (void)threads, (void)accumulate, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c,
      (void)ldc, (void)epilogue;
  return false;
}

}  // namespace detail

template <Layout LA, Layout LB, class T, class Epilogue = NoEpilogue>
void gemm(Accumulate accumulate, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c, int ldc,
          Epilogue epilogue = {}) {
  if (m == 0 || n == 0) return;
  const std::size_t work = static_cast<std::size_t>(m) * static_cast<std::size_t>(n) * static_cast<std::size_t>(k);
  if (detail::packed_product<LA, LB>(work >= gemm_parallel_threshold ? available_threads() : 1, accumulate, m, n, k,
                                     a, lda, b, ldb, c, ldc, epilogue)) {
    return;
  }
  const bool split_rows = m >= n;
  const std::size_t dim = split_rows ? static_cast<std::size_t>(m) : static_cast<std::size_t>(n);
  const std::size_t panel = split_rows ? gemm_row_panel<T> : gemm_column_panel<T>;
  parallel_panels(dim, panel, 16, work >= gemm_parallel_threshold ? work / dim : 0,
                  [&](std::size_t begin, std::size_t end) {
    const auto first = static_cast<std::ptrdiff_t>(begin);
    const auto count = static_cast<Eigen::Index>(end - begin);
    if (split_rows) {
      detail::gemm_block<LA, LB>(accumulate, count, n, k, at<LA>(a, lda, first, 0), lda, b, ldb, c + first * ldc,
                                 ldc);
      epilogue(static_cast<int>(begin), static_cast<int>(end), 0, n);
    } else {
      detail::gemm_block<LA, LB>(accumulate, m, count, k, a, lda, at<LB>(b, ldb, 0, first), ldb, c + first, ldc);
      epilogue(0, m, static_cast<int>(begin), static_cast<int>(end));
    }
  }, Placement::owner);  // Eigen's packing buffers (ReusedBlocking) are sized by each thread's chunk
}

// The same product on the calling thread only, for callers that parallelise over something else
// (convolution runs one product per sample).
template <Layout LA, Layout LB, class T, class Epilogue = NoEpilogue>
void gemm_serial(Accumulate accumulate, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c,
                 int ldc, Epilogue epilogue = {}) {
  if (m == 0 || n == 0) return;
  if (detail::packed_product<LA, LB>(1, accumulate, m, n, k, a, lda, b, ldb, c, ldc, epilogue)) return;
  detail::gemm_block<LA, LB>(accumulate, m, n, k, a, lda, b, ldb, c, ldc);
  epilogue(0, m, 0, n);
}

}  // namespace etnn::cpu
