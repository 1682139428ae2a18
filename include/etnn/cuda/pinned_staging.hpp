#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// cuda::PinnedStaging: host data sent to the device without the host waiting, PyTorch's
// pin_memory() + .to(device, non_blocking=True). cudaMemcpyAsync out of pageable memory may wait
// for the stream before it stages the values; out of page-locked (pinned) memory it only enqueues
// the transfer. So each send copies the values into a pinned slot on the host, enqueues the
// transfer from it, and records an event after it: a slot is written again only once its event
// says the transfer is done (cudaEventQuery, which never waits).
//   staging.send(device_labels, n, [&](int* pinned) { std::copy_n(labels, n, pinned); });
// A ring of at most max_slots slots: while every slot is in flight (the host max_slots sends ahead
// of the device), a new one is made; past max_slots the send waits for the oldest transfer, which
// bounds the pinned memory. A slot only grows. After warm-up a send allocates nothing.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../core/error.hpp"
#include "pinned_memory.hpp"
#include "runtime.hpp"

namespace etnn::cuda {

class PinnedStaging {
 public:
  static constexpr std::size_t max_slots = 4;

  PinnedStaging() = default;
  // A copy starts with its own, empty, ring (a loss that holds one stays copyable).
  PinnedStaging(const PinnedStaging&) {}
  PinnedStaging& operator=(const PinnedStaging&) { return *this; }
  PinnedStaging(PinnedStaging&&) = default;
  PinnedStaging& operator=(PinnedStaging&&) = default;
  ~PinnedStaging() = default;

  // n values to device memory at `device`, ordered on etnn's stream: fill(T* pinned) writes them
  // into pinned host memory, from which the transfer is enqueued. Returns without waiting for the
  // transfer; whatever fill read from may be reused at once. Not while etnn's stream is being
  // recorded into a graph: a replay would copy whatever the slot then held.
  template <class T, class Fill>
  void send(T* device, std::size_t n, Fill&& fill) {
    if (n == 0) return;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    ETNN_CHECK_CUDA(runtime().cudaStreamIsCapturing(stream(), &capture));
    if (capture != cudaStreamCaptureStatusNone)
      throw DeviceError("etnn::cuda::PinnedStaging::send: host data sent while etnn's stream is being recorded "
                        "into a CUDA graph; stage inputs before recording");
    Slot& slot = free_slot(n * sizeof(T));
    fill(reinterpret_cast<T*>(slot.host.data()));
    ETNN_CHECK_CUDA(
        runtime().cudaMemcpyAsync(device, slot.host.data(), n * sizeof(T), cudaMemcpyHostToDevice, stream()));
    slot.sent.record();
    slot.sequence = ++sends_;
  }

  // Slots made so far (at most max_slots).
  std::size_t slots() const noexcept { return slots_.size(); }

 private:
  struct Slot {
    PinnedBuffer<std::byte> host;
    Event sent;                  // recorded after the slot's latest transfer
    std::uint64_t sequence = 0;  // its latest send, counted from 1; 0: never sent
  };

  // Whether the slot's latest transfer is done (or it never had one), without waiting.
  static bool idle(const Slot& slot) { return slot.sent.done(); }

  // An idle slot of at least `bytes`: the smallest idle one that fits, else the largest idle one
  // (grown), else a new one, else the oldest in flight once its transfer is done. Sends of
  // different sizes through one ring (labels and class weights) so settle into slots that fit
  // them, and stop growing any.
  Slot& free_slot(std::size_t bytes) {
    const auto better = [bytes](const Slot& a, const Slot& b) {  // a is a better pick than b
      const bool a_fits = a.host.size() >= bytes, b_fits = b.host.size() >= bytes;
      if (a_fits != b_fits) return a_fits;
      return a_fits ? a.host.size() < b.host.size() : a.host.size() > b.host.size();
    };
    auto it = slots_.end();
    for (auto s = slots_.begin(); s != slots_.end(); ++s)
      if (idle(*s) && (it == slots_.end() || better(*s, *it))) it = s;
    if (it == slots_.end() && slots_.size() < max_slots) {
      slots_.emplace_back();
      it = slots_.end() - 1;
    } else if (it == slots_.end()) {
      it = std::min_element(slots_.begin(), slots_.end(),
                            [](const Slot& a, const Slot& b) { return a.sequence < b.sequence; });
      it->sent.wait();
    }
    it->host.reserve_discard(bytes);
    return *it;
  }

  std::vector<Slot> slots_;
  std::uint64_t sends_ = 0;
};

}  // namespace etnn::cuda
