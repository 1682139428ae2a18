#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// Owners for the host side of asynchronous transfers: PinnedBuffer<T>, page-locked host memory
// (cudaHostAlloc; a copy to or from it is a DMA transfer that never makes the host wait), and
// Event, a CUDA event without timing that says when the work before it is done.
//   PinnedBuffer<double> rows;  rows.reserve_discard(batch);   // grows, contents then undefined
//   Event arrived;  arrived.record();  ...  arrived.wait();   // at once if the work is done
// Both release their resource when they go, ignoring errors (destructors may run at exit, after
// the context is gone), as Cuda::deallocate does.
#include <cstddef>
#include <memory>

#include "runtime.hpp"

namespace etnn::cuda {

template <class T>
class PinnedBuffer {
 public:
  // Room for at least n values; growing drops the contents and frees the old memory, so it must
  // not grow while a transfer to or from that memory is in flight (its owners grow only memory
  // whose transfer is done).
  void reserve_discard(std::size_t n) {
    if (n <= size_) return;
    memory_.reset();
    size_ = 0;
    void* p = nullptr;
    ETNN_CHECK_CUDA(runtime().cudaHostAlloc(&p, n * sizeof(T), cudaHostAllocDefault));
    memory_.reset(static_cast<T*>(p));
    size_ = n;
  }
  T* data() noexcept { return memory_.get(); }
  const T* data() const noexcept { return memory_.get(); }
  std::size_t size() const noexcept { return size_; }

 private:
  struct FreeHost {
    void operator()(T* p) const noexcept {
      if (runtime().cudaFreeHost(p) != cudaSuccess) (void)runtime().cudaGetLastError();
    }
  };
  std::unique_ptr<T, FreeHost> memory_;
  std::size_t size_ = 0;
};

class Event {
 public:
  // Made by create() or the first record(), so that an owner that never records makes no CUDA
  // call.
  Event() = default;
  cudaEvent_t get() const noexcept { return event_.get(); }
  // Made now, unless made (for an owner that makes everything before its first step).
  void create() {
    if (event_) return;
    cudaEvent_t event = nullptr;
    ETNN_CHECK_CUDA(runtime().cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    event_.reset(event);
  }
  // Recorded after the work enqueued so far on etnn's stream.
  void record() {
    create();
    ETNN_CHECK_CUDA(runtime().cudaEventRecord(get(), stream()));
  }
  // Whether that work is done (or nothing was recorded), without waiting.
  bool done() const { return !event_ || finished(get()); }
  // Returns once that work is done: at once when it already is.
  void wait() const {
    if (!done()) ETNN_CHECK_CUDA(runtime().cudaEventSynchronize(get()));
  }

 private:
  struct Destroy {
    void operator()(cudaEvent_t e) const noexcept {
      if (runtime().cudaEventDestroy(e) != cudaSuccess) (void)runtime().cudaGetLastError();
    }
  };
  std::unique_ptr<CUevent_st, Destroy> event_;
};

}  // namespace etnn::cuda
