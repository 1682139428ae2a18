#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// thread_scratch<T>(values): the calling thread's scratch of at least `values` T, a buffer of its
// own that grows to the largest request and is reused (as the GEMM's packing buffers are), so a
// pass allocates nothing after its first. One buffer per thread and T: a caller uses it within
// one call and must not hold it across another caller's (convolution's columns, attention's
// score blocks).
//
// Which pool thread runs which chunk of a shared job changes from step to step (a worker that
// the OS runs late takes none; cpu/thread_pool.hpp), so a warm-up pass may not have reached every
// thread's scratch. spread_thread_scratch() grows every pool thread's to the largest request any
// thread has made, by a job each thread owns: a training pass's reserve() calls it after its
// warm-up pass, and later passes allocate nothing whichever thread takes which chunk.
#include <atomic>
#include <cstddef>

#include "../core/device.hpp"
#include "../tensor/buffer.hpp"
#include "thread_pool.hpp"

namespace etnn::cpu {

namespace detail {
// The largest thread_scratch<T> request of any thread so far.
template <class T>
std::atomic<std::size_t>& largest_thread_scratch() {
  static std::atomic<std::size_t> values{0};
  return values;
}
}  // namespace detail

template <class T>
T* thread_scratch(std::size_t values) {
  thread_local Buffer<T, Cpu> scratch;
  if (values > scratch.size()) {
    std::atomic<std::size_t>& largest = detail::largest_thread_scratch<T>();
    std::size_t seen = largest.load(std::memory_order_relaxed);
    while (seen < values && !largest.compare_exchange_weak(seen, values, std::memory_order_relaxed)) {
    }
  }
  scratch.reserve_discard(values);
  return scratch.data();
}

inline void spread_thread_scratch() {
  ThreadPool& pool = ThreadPool::instance();
  if (ThreadPool::inside_job()) return;  // its job would run on this thread alone
  auto grow = [](std::size_t) {
    thread_scratch<float>(detail::largest_thread_scratch<float>().load(std::memory_order_relaxed));
    thread_scratch<double>(detail::largest_thread_scratch<double>().load(std::memory_order_relaxed));
  };
  pool.run(static_cast<std::size_t>(pool.threads()), grow, Placement::owner);
}

}  // namespace etnn::cpu
