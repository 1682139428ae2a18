#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// A loss computed on the device comes back to the host without the host waiting for it:
// LossReadback enqueues the copy of its values (row losses, or block partial sums) into pinned
// host memory, and PendingLoss<T> is the loss on its way, what PyTorch's loss tensor is before
// loss.item(). Converting a PendingLoss to T (or value()) reads it: it waits for the copy only if
// the copy is not done yet (a later read of the device's results, such as the host's non-finite
// guard's verdict, may have made it so), then adds the values in their order:
//   Sum::rows       in T, in row order, then times scale (the host's label_rows_loss);
//   Sum::partials   in double, in block order, then converted to T and times scale.
// The values arrive in the calling host thread's readback (loss_readback(), kept until exit, so a
// PendingLoss outlives the loss object that made it) and stay there until that thread's next loss
// on the device: a PendingLoss read after that is an etnn::Error (read it before computing another
// loss on the device on that thread). A read value is kept. Read it on the thread that computed it
// (or after that thread's next loss has been ordered after the read).
#include <cstddef>
#include <cstdint>
#include <string>

#include "../core/error.hpp"
#include "loss_total.hpp"
#include "per_thread.hpp"
#include "pinned_memory.hpp"
#include "runtime.hpp"

namespace etnn::cuda {

template <class T>
class PendingLoss {
 public:
  // Where the values arrive and which of the readback's losses they are.
  struct Source {
    const double* values;     // pinned host memory
    const double* on_device;  // where they were copied from (the loss's device memory)
    std::size_t count;
    const Event* arrived;         // recorded after the copy
    const std::uint64_t* losses;  // the readback's loss count: `loss` while the values are this loss's
    std::uint64_t loss;
  };

  PendingLoss(Source source, Sum sum, T scale) : source_(source), sum_(sum), scale_(scale) {}

  T value() const {
    if (read_) return value_;
    if (*source_.losses != source_.loss)
      throw Error("etnn: a loss computed on the device was read after another loss was computed on the device "
                  "on the same thread, which replaced its value; convert it to a number before the next loss (a "
                  "Trainer's step computes one)");
    source_.arrived->wait();
    value_ = total();
    read_ = true;
    return value_;
  }
  operator T() const { return value(); }

  // The values on the device, for kernels enqueued before the thread's next loss on the device (the
  // non-finite guard's verdict, cuda/step_verdict.hpp, tests them there).
  const double* values_on_device() const noexcept { return source_.on_device; }
  std::size_t count() const noexcept { return source_.count; }
  Sum sum() const noexcept { return sum_; }
  T scale() const noexcept { return scale_; }

 private:
  T total() const { return loss_total(source_.values, source_.count, sum_, scale_); }

  Source source_;
  Sum sum_;
  T scale_;
  mutable T value_{};
  mutable bool read_ = false;
};

// The host side of losses' values: pinned memory that grows to the largest count, the event
// recorded after each copy into it, and the count of losses it has received.
class LossReadback {
 public:
  // The count doubles at `device` (written by work already enqueued on etnn's stream), copied to
  // the host without a wait, as the loss scale * their sum (see Sum).
  template <class T>
  PendingLoss<T> receive(const double* device, std::size_t count, Sum sum, T scale) {
    const std::uint64_t loss = ++losses_;  // first: an earlier PendingLoss is stale even if this throws
    if (count > values_.size()) {
      arrived_.wait();  // the memory is freed: no copy into it may be in flight
      values_.reserve_discard(count);
    }
    if (count > 0)
      ETNN_CHECK_CUDA(runtime().cudaMemcpyAsync(values_.data(), device, count * sizeof(double),
                                                cudaMemcpyDeviceToHost, stream()));
    arrived_.record();
    return PendingLoss<T>({values_.data(), device, count, &arrived_, &losses_, loss}, sum, scale);
  }

 private:
  PinnedBuffer<double> values_;
  Event arrived_;
  std::uint64_t losses_ = 0;
};

// The calling host thread's readback (cuda/per_thread.hpp).
inline LossReadback& loss_readback() { return detail::per_thread<LossReadback>(); }

}  // namespace etnn::cuda
