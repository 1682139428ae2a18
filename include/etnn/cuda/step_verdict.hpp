#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// cuda::StepVerdict: the non-finite guard's verdict on a training step, decided on the device, so
// that the host does not wait for it within the step. For P parameter tensors it is P + 6 words
// of device memory:
//   word[p], p < P   ~i for the first flat index i in tensor p's range whose gradient is NaN or
//                    infinite, 0 when there is none (atomicMax of ~i keeps the minimum i); the
//                    range runs from tensor p's offset to tensor p + 1's, so that the zeros that
//                    align the next tensor (in the same layer) count as tensor p's
//   word[P]          1 when a loss marked (each micro-batch's, with gradient accumulation), as
//                    the host will read it (cuda::PendingLoss), is NaN or infinite
//   word[P + 1]      1 when the step skips: any word above or below is marked
//   word[P + 2..4]   a loss's input outside its domain (BCE's probabilities), as the loss left it on
//                    the device (cuda/input_check.hpp): ~i, the input's and the target's values
//                    (0 in word[P + 2] when none)
//   word[P + 5]      1 when an input error is owed: one that a step or micro-batch enqueued before
//                    this one marked and the host has not read yet, so everything after it skips
//                    (and its own input check is not kept)
// The owed word is the caller's (the non-finite guard's, never null): scan_loss sets it with an
// input error, and the host clears it once it has read that error (the guard throws it then).
// A step: begin() zeroes the words, scan_gradients() and scan_loss() mark them, kernels
// predicated on skip() update (or not), and send() copies the words into pinned host memory with
// an event, without a wait. The host reads them when it needs the verdict (normally some steps
// later, when the device is past this one: arrived() asks without waiting): wait() returns at
// once when the copy has arrived, then skipped(), loss_non_finite() and first_non_finite(p)
// answer. wait() must come before the next send(). The optimizer keeps a ring of them
// (optim::Optimizer::verdict_slots), so that several steps' verdicts can be on their way.
#include <bit>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../core/device.hpp"
#include "../tensor/buffer.hpp"
#include "input_check.hpp"
#include "memory.hpp"
#include "pending_loss.hpp"
#include "pinned_memory.hpp"
#include "reduce.hpp"
#include "runtime.hpp"

namespace etnn::cuda {

namespace detail {

// Marks the non-finite x[i], i < n, in words (laid out as StepVerdict's); offsets: the P tensors'
// offsets, ascending. The tensor search runs only for a non-finite value.
template <class T>
__global__ void mark_non_finite_gradients_kernel(const T* x, std::size_t n, const std::size_t* offsets,
                                                 std::size_t tensors, unsigned long long* words) {
  for (const std::size_t i : grid_stride(n)) {
    if (isfinite(x[i])) continue;
    std::size_t lo = 0, hi = tensors - 1;  // the last tensor whose offset is at most i (the first for none)
    while (lo < hi) {
      const std::size_t mid = (lo + hi + 1) / 2;
      if (offsets[mid] <= i)
        lo = mid;
      else
        hi = mid - 1;
    }
    // A read first, so that a gradient full of NaN does not contend for the words: a stale read
    // costs only an atomic that changes nothing. Volatile (PTX's ld.volatile, a relaxed load at
    // system scope), so that it is not a data race with other threads' atomics.
    const volatile unsigned long long* seen = words;
    const unsigned long long mark = ~static_cast<unsigned long long>(i);
    if (seen[lo] < mark) atomicMax(&words[lo], mark);
    if (seen[tensors + 1] == 0) atomicOr(&words[tensors + 1], 1ull);
  }
}

// Marks a non-finite loss, one block of reduction_threads: the values (count n) as
// PendingLoss::value() reads them, each converted to T for Sum::rows, then added by loss_total,
// the host's own function. The block only checks each value and bounds the sum (loss_may_overflow);
// thread 0 adds the values in their order, as the host will, only where the bound leaves the
// answer open (a loss near T's largest value), so the device and the host agree bit for bit.
// Thread 0 also takes in the loss's input check (found_input: cuda/input_check.hpp's three words,
// or null), through the caller's owed word (see StepVerdict).
template <class T>
__global__ void mark_non_finite_loss_kernel(const double* values, std::size_t n, Sum sum, T scale,
                                            const unsigned long long* found_input, unsigned long long* owed,
                                            std::size_t tensors, unsigned long long* words) {
  bool finite = true;
  double magnitude = 0.0;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) {
    finite = finite && (sum == Sum::rows ? isfinite(static_cast<T>(values[i])) : isfinite(values[i]));
    magnitude += fabs(values[i]);
  }
  const double bound = block_sum(magnitude);
  finite = __syncthreads_and(finite) != 0;
  if (threadIdx.x != 0) return;
  if (*owed != 0) {  // after an input error the host has not read yet
    words[tensors + 5] = 1;
    words[tensors + 1] = 1;
  } else if (found_input != nullptr && found_input[0] != 0) {
    for (int k = 0; k < 3; ++k) words[tensors + 2 + k] = found_input[k];
    *owed = 1;
    words[tensors + 1] = 1;
  }
  if (finite && (!loss_may_overflow<T>(bound, n, scale) || isfinite(loss_total<T>(values, n, sum, scale)))) return;
  words[tensors] = 1;
  words[tensors + 1] = 1;
}

}  // namespace detail

class StepVerdict {
 public:
  // tensor_offsets: where the parameter tensors start in the flat gradient buffer, ascending (at
  // least one). Nothing is allocated until reserve() or the first begin().
  explicit StepVerdict(std::vector<std::size_t> tensor_offsets) : tensor_offsets_(std::move(tensor_offsets)) {}

  std::size_t tensors() const noexcept { return tensor_offsets_.size(); }
  // The words of a verdict on `tensors` parameter tensors (the layout above).
  static constexpr std::size_t words_for(std::size_t tensors) noexcept { return tensors + 6; }

  // Makes its device and pinned memory and its event, unless made (by this or the first begin()).
  void reserve() {
    if (!words_.empty()) return;  // words_ last: it says all four are made
    arrived_.create();
    host_.reserve_discard(words_for(tensors()));
    offsets_ = Buffer<std::size_t, Cuda>(tensors());
    copy_from_host(Cuda{}, offsets_.data(), tensor_offsets_.data(), tensors());
    words_ = Buffer<unsigned long long, Cuda>(words_for(tensors()));
  }
  // Zeroes the words for a new step.
  void begin() {
    reserve();
    complaint_ = nullptr;
    ETNN_CHECK_CUDA(runtime().cudaMemsetAsync(words_.data(), 0, words_.size() * sizeof(unsigned long long), stream()));
  }
  // The gradients g[0, n) (n: the flat size).
  template <class T>
  void scan_gradients(const T* g, std::size_t n) {
    launch("etnn::optim mark_non_finite_gradients", detail::mark_non_finite_gradients_kernel<T>, {grid_blocks(n), 256},
           g, n, offsets_.data(), tensors(), words_.data());
  }
  // The loss on its way to the host, and the input check a loss left on the device in its step
  // (cuda::DeferInputChecks::check(); found null for none), before the thread's next loss reuses
  // their device memory; owed: the caller's word (above).
  template <class T>
  void scan_loss(const PendingLoss<T>& loss, const InputCheck& input_check, unsigned long long* owed) {
    if (input_check.found != nullptr) complaint_ = input_check.complaint;
    launch("etnn::optim mark_non_finite_loss", detail::mark_non_finite_loss_kernel<T>,
           {1, detail::reduction_threads}, loss.values_on_device(), loss.count(), loss.sum(), loss.scale(),
           input_check.found, owed, tensors(), words_.data());
  }
  // Device memory: non-zero when the step skips. Kernels enqueued after the scans read it.
  const unsigned long long* skip() const noexcept { return words_.data() + tensors() + 1; }

  // The words to the host, without a wait.
  void send() {
    ETNN_CHECK_CUDA(runtime().cudaMemcpyAsync(host_.data(), words_.data(), words_.size() * sizeof(unsigned long long),
                                              cudaMemcpyDeviceToHost, stream()));
    arrived_.record();
  }
  // Whether the last send's words are on the host, without waiting.
  bool arrived() const { return arrived_.done(); }
  // Returns once they are: at once when the device is past that send.
  void wait() const { arrived_.wait(); }

  // After wait(): the verdict.
  bool skipped() const noexcept { return host_.data()[tensors() + 1] != 0; }
  bool loss_non_finite() const noexcept { return host_.data()[tensors()] != 0; }
  // The first index marked in tensor p's range, if any.
  std::optional<std::size_t> first_non_finite(std::size_t p) const noexcept {
    const unsigned long long word = host_.data()[p];
    if (word == 0) return std::nullopt;
    return static_cast<std::size_t>(~word);
  }
  // The loss's message for its input outside the domain, if one was marked ("" when none; scan_loss
  // kept the message of the check it passed on).
  std::string input_error() const {
    const unsigned long long* word = host_.data() + tensors();
    if (word[2] == 0 || complaint_ == nullptr) return {};
    return complaint_(static_cast<std::size_t>(~word[2]), std::bit_cast<double>(word[3]),
                      std::bit_cast<double>(word[4]));
  }
  // Whether the step skipped because an earlier step's input error was owed.
  bool skipped_after_input_error() const noexcept { return host_.data()[tensors() + 5] != 0; }

 private:
  std::vector<std::size_t> tensor_offsets_;
  Buffer<std::size_t, Cuda> offsets_;
  Buffer<unsigned long long, Cuda> words_;
  PinnedBuffer<unsigned long long> host_;
  Event arrived_;
  std::string (*complaint_)(std::size_t, double, double) = nullptr;  // the marked loss's (InputCheck)
};

}  // namespace etnn::cuda
