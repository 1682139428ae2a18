#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>. No CUDA header, so that a
// host test (tests/cuda/test_per_thread.cpp) checks it without a GPU.
// Device scratch of one kind (reduction partials, batch-norm statistics, operand copies) for the
// calling host thread: per_thread<V, Tag>() is this thread's V for Tag, made on its first call.
//
// Why per thread: every thread's work goes to etnn's one stream, in the order the threads enqueue
// it. Shared scratch would let thread B's kernel overwrite what thread A's kernel just wrote before
// A's next kernel (or copy to the host) reads it. With a V per thread, each thread's uses of it
// run in the order that thread enqueued them.
// Why kept until exit: a CUDA graph recorded by a thread holds the addresses of that thread's
// scratch, and may be replayed after the thread has ended (a Trainer stepped on a worker thread,
// then on the main one); so a V outlives its thread, owned by a process-wide list.
#include <list>
#include <mutex>

namespace etnn::cuda::detail {

template <class V, class Tag = V>
V& per_thread() {
  thread_local V* mine = nullptr;
  if (mine == nullptr) {
    static std::mutex mutex;
    static std::list<V> all;  // a list: adding one never moves the others
    const std::lock_guard<std::mutex> lock(mutex);
    mine = &all.emplace_back();
  }
  return *mine;
}

}  // namespace etnn::cuda::detail
