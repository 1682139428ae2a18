#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// General matrix multiply on the CPU: C += A B with Eigen's packed, cache-blocked kernel (gebp).
//   A: (M, K)   B: (K, N)   C: (M, N) row-major, leading dimension ldc
// A and B may each be row- or column-major (a transposed operand is the other layout, no copy).
//
// Two things differ from writing `C.noalias() += A * B` with Eigen maps:
//  - Packing buffers belong to the calling thread and grow to the largest product it has seen,
//    so that after the first training step a GEMM allocates nothing (Eigen allocates them for
//    every product above its 128 KiB stack limit).
//  - Threading is ours: the larger of M and N is split across the OpenMP threads, each running a
//    sequential GEMM on its block, when the product is large enough to pay for it.
// This uses Eigen's internal GEMM entry point (Eigen 3.4: general_matrix_matrix_product).
#include <algorithm>
#include <cstddef>

#include <Eigen/Core>

#include "../core/device.hpp"
#include "../tensor/buffer.hpp"
#include "parallel.hpp"

#if !EIGEN_VERSION_AT_LEAST(3, 4, 0)
#error "etnn needs Eigen 3.4 or newer"
#endif

namespace etnn::cpu {

enum class Layout { row_major, col_major };

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

// Element (i, j) of a matrix with the given layout and leading dimension.
template <Layout L, class T>
const T* at(const T* m, std::ptrdiff_t ld, std::ptrdiff_t i, std::ptrdiff_t j) {
  return L == Layout::row_major ? m + i * ld + j : m + j * ld + i;
}

template <Layout LA, Layout LB, class T>
void gemm_block(Eigen::Index m, Eigen::Index n, Eigen::Index k, const T* a, Eigen::Index lda, const T* b,
                Eigen::Index ldb, T* c, Eigen::Index ldc) {
  using Product = Eigen::internal::general_matrix_matrix_product<Eigen::Index, T, eigen_order(LA), false, T,
                                                                 eigen_order(LB), false, Eigen::RowMajor, 1>;
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
void parallel_panels(std::size_t n, std::size_t panel, std::size_t grain, std::size_t work_per_index, F&& f) {
  const std::size_t panels = (n + panel - 1) / panel;
  parallel_chunks(panels, std::max<std::size_t>(1, grain / panel), work_per_index * panel,
                  [&](std::size_t first, std::size_t last) { f(first * panel, std::min(n, last * panel)); });
}

// Products smaller than this many multiply-adds run on one thread.
inline constexpr std::size_t gemm_parallel_threshold = std::size_t{1} << 18;

template <Layout LA, Layout LB, class T>
void gemm_accumulate(int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c, int ldc) {
  if (m == 0 || n == 0 || k == 0) return;
  const std::size_t work = static_cast<std::size_t>(m) * static_cast<std::size_t>(n) * static_cast<std::size_t>(k);
  const bool split_rows = m >= n;
  const std::size_t dim = split_rows ? static_cast<std::size_t>(m) : static_cast<std::size_t>(n);
  const std::size_t panel = split_rows ? gemm_row_panel<T> : gemm_column_panel<T>;
  parallel_panels(dim, panel, 16, work >= gemm_parallel_threshold ? work / dim : 0,
                  [&](std::size_t begin, std::size_t end) {
    const auto first = static_cast<std::ptrdiff_t>(begin);
    const auto count = static_cast<Eigen::Index>(end - begin);
    if (split_rows) {
      detail::gemm_block<LA, LB>(count, n, k, detail::at<LA>(a, lda, first, 0), lda, b, ldb, c + first * ldc, ldc);
    } else {
      detail::gemm_block<LA, LB>(m, count, k, a, lda, detail::at<LB>(b, ldb, 0, first), ldb, c + first, ldc);
    }
  });
}

// The same product on the calling thread only, for callers that parallelise over something else
// (convolution runs one product per sample).
template <Layout LA, Layout LB, class T>
void gemm_accumulate_serial(int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c, int ldc) {
  if (m == 0 || n == 0 || k == 0) return;
  detail::gemm_block<LA, LB>(m, n, k, a, lda, b, ldb, c, ldc);
}

}  // namespace etnn::cpu
