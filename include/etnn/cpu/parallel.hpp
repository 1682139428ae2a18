#pragma once
// Threading of CPU loops: OpenMP when the build has it, a plain loop otherwise.
// Eigen's GEMM uses the same OpenMP thread count.
#include <algorithm>
#include <cstddef>

#include <Eigen/Core>
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace etnn {

// Threads used by etnn's CPU kernels (OpenMP loops and Eigen's GEMM). n <= 0 keeps the default.
inline void set_num_threads(int n) {
  if (n <= 0) return;
#if defined(_OPENMP)
  omp_set_num_threads(n);
#endif
  Eigen::setNbThreads(n);
}

inline int num_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

namespace cpu {

// Loops shorter than this many elements stay on one thread: a parallel region costs a few
// microseconds, about what one core needs for this much simple elementwise work.
inline constexpr std::size_t parallel_threshold = 1 << 15;

// Calls f(begin, end) on disjoint chunks covering [0, n); each chunk holds at least `grain`
// indices. Chunks run on the OpenMP threads when n * work_per_index is large enough.
template <class F>
void parallel_chunks(std::size_t n, std::size_t grain, std::size_t work_per_index, F&& f) {
  if (n == 0) return;
#if defined(_OPENMP)
  const std::size_t threads = static_cast<std::size_t>(omp_get_max_threads());
  if (threads > 1 && n * work_per_index >= parallel_threshold && n > grain) {
    const std::size_t chunks = std::min(threads, (n + grain - 1) / grain);
    const std::size_t per = (n + chunks - 1) / chunks;
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static, 1)
    for (std::size_t c = 0; c < chunks; ++c) {
      const std::size_t begin = c * per;
      f(begin, std::min(n, begin + per));
    }
    return;
  }
#else
  (void)grain;
  (void)work_per_index;
#endif
  f(std::size_t{0}, n);
}

// Calls f(i) for every i in [0, n).
template <class F>
void parallel_for(std::size_t n, F&& f) {
  parallel_chunks(n, 1024, 1, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) f(i);
  });
}

}  // namespace cpu
}  // namespace etnn
