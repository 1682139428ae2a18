#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// Threading of CPU loops: OpenMP when the build has it, a plain loop otherwise.
// The GEMM (cpu/gemm.hpp) threads through the same chunks.
#include <algorithm>
#include <cstddef>
#include <exception>

#include "../core/config.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace etnn {

// Threads used by etnn's CPU kernels (elementwise loops and GEMMs). n <= 0 keeps the default
// (OMP_NUM_THREADS, else one per core). Without OpenMP everything runs on the calling thread.
inline void set_num_threads(int n) {
#if defined(_OPENMP)
  if (n > 0) omp_set_num_threads(n);
#else
  (void)n;
#endif
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

// Chunk c of `chunks` near-equal chunks of [0, n): [n c / chunks, n (c + 1) / chunks).
struct ChunkBounds {
  std::size_t begin;
  std::size_t end;
};
constexpr ChunkBounds chunk_bounds(std::size_t n, std::size_t chunks, std::size_t c) {
  return {n * c / chunks, n * (c + 1) / chunks};
}

// Number of chunks for n indices of at least `grain` each, on `threads` threads.
constexpr std::size_t chunk_count(std::size_t n, std::size_t grain, std::size_t threads) {
  return std::max<std::size_t>(1, std::min(threads, n / std::max<std::size_t>(grain, 1)));
}

// Calls f(begin, end) on disjoint chunks covering [0, n); each chunk holds at least `grain`
// indices (unless n is smaller). Chunks run on the OpenMP threads when n * work_per_index is
// large enough. An exception thrown by f on any thread is rethrown here after all chunks end.
template <class F>
void parallel_chunks(std::size_t n, std::size_t grain, std::size_t work_per_index, F&& f) {
  if (n == 0) return;
#if defined(_OPENMP)
  const std::size_t chunks = chunk_count(n, grain, static_cast<std::size_t>(omp_get_max_threads()));
  if (chunks > 1 && n * work_per_index >= parallel_threshold) {
    std::exception_ptr error;
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static, 1)
    for (std::size_t c = 0; c < chunks; ++c) {
      try {
        const ChunkBounds chunk = chunk_bounds(n, chunks, c);
        f(chunk.begin, chunk.end);
      } catch (...) {
#pragma omp critical(etnn_parallel_error)
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
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
    ETNN_SIMD
    for (std::size_t i = begin; i < end; ++i) f(i);
  });
}

}  // namespace cpu
}  // namespace etnn
