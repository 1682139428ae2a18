#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// Threading of CPU loops: etnn's thread pool (cpu/thread_pool.hpp) when the build enables
// threads (-fopenmp, ETNN_WITH_OPENMP; OpenMP itself only vectorises loops, see ETNN_SIMD), a
// plain loop otherwise. The GEMM (cpu/gemm.hpp) threads through the same pool.
#include <algorithm>
#include <cstddef>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

#include "../core/config.hpp"
#include "thread_pool.hpp"
#include "widest_vectors.hpp"

#if defined(_OPENMP)
#define ETNN_THREADED 1
#else
#define ETNN_THREADED 0
#endif

namespace etnn {

// Threads used by etnn's CPU kernels (elementwise loops and GEMMs), the calling thread included.
// n <= 0 restores the default (OMP_NUM_THREADS, else one per core). Without threads in the build
// everything runs on the calling thread. Called while another thread's parallel loop runs, it
// waits for that loop to end; it must not be called from inside a parallel loop's body.
inline void set_num_threads(int n) {
#if ETNN_THREADED
  cpu::ThreadPool::instance().set_threads(n);
#else
  (void)n;
#endif
}

inline int num_threads() {
#if ETNN_THREADED
  return cpu::ThreadPool::instance().threads();
#else
  return 1;
#endif
}

// CPUs this process may run on (its affinity mask, as taskset or a container's cpuset set it),
// at least 1.
inline int usable_cpus() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

namespace cpu {

// Threads the packed GEMM's tiles are sized for now (1 while the pool runs shared jobs on their
// callers alone because its workers are not getting the CPU, see cpu/thread_pool.hpp).
inline int available_threads() {
#if ETNN_THREADED
  return ThreadPool::instance().available_threads();
#else
  return 1;
#endif
}

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

// Calls f(begin, end) on disjoint chunks covering [0, n), each with the widest vectors the CPU has
// (cpu/widest_vectors.hpp); each chunk holds at least `grain` indices (unless n is smaller).
// Chunks run on the pool's threads when n * work_per_index is large enough: chunk c on thread c
// unless that thread comes late and another takes it (Placement::home_range, so that a pass over
// the same array in every step touches each chunk from the same core), on whichever takes them
// (any_thread), or always on thread c (owner) (cpu/thread_pool.hpp). The first exception
// thrown by f is rethrown here once every chunk that started has ended; chunks not started by
// then may be skipped.
template <class F>
void parallel_chunks(std::size_t n, std::size_t grain, std::size_t work_per_index, F&& f,
                     Placement placement = Placement::home_range) {
  if (n == 0) return;
#if ETNN_THREADED
  const std::size_t chunks = chunk_count(n, grain, static_cast<std::size_t>(num_threads()));
  if (chunks > 1 && n * work_per_index >= parallel_threshold) {
    auto chunk = [&](std::size_t c) {
      const ChunkBounds bounds = chunk_bounds(n, chunks, c);
      with_widest_vectors(f, bounds.begin, bounds.end);
    };
    ThreadPool::instance().run(chunks, chunk, placement);
    return;
  }
#else
  (void)grain;
  (void)work_per_index;
  (void)placement;
#endif
  with_widest_vectors(f, std::size_t{0}, n);
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
