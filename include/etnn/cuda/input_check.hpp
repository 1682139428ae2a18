#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// A loss's check of its inputs' domain (an expr::DomainTerm: BCE's probabilities in [0, 1]) left
// on the device instead of read back at once. Outside a DeferInputChecks scope the loss waits for
// the check's answer and throws before backward, as on the host. Inside one (the Trainer's, when
// the non-finite guard decides the step on the device) the first loss with such a check leaves its
// answer on the device, in three words of the thread's scratch:
//   found[0]   ~i for the first element i outside the domain, 0 when there is none
//   found[1]   the input's value at i, as the bits of a double
//   found[2]   the target's value at i, likewise
// and the scope keeps where they are and the loss's message (InputCheck), whatever the loss
// returns (a loss built on BCE's keeps it too). A second such loss in the same scope checks at
// once. The guard's verdict (cuda/step_verdict.hpp) takes the words in: the step skips, as do the
// steps enqueued after it until the host has read that verdict, and the host then throws the
// loss's own message, naming the element, as PyTorch reports a device-side assertion at a later
// synchronisation.
#include <cstddef>
#include <string>

#include "reduce.hpp"
#include "runtime.hpp"

namespace etnn::cuda {

// Where a loss left its input check on the device (found null: none did), and its message for the
// element found there.
struct InputCheck {
  const unsigned long long* found = nullptr;  // device memory, the three words above
  std::string (*complaint)(std::size_t i, double input, double target) = nullptr;
};

// While one that defers lives on a thread, the first of that thread's element-wise losses on the
// device with an input check leaves it on the device (for a caller that reads it there: the
// non-finite guard's verdict).
class DeferInputChecks {
 public:
  explicit DeferInputChecks(bool defer) : outer_(current()) {
    if (defer) current() = this;
  }
  DeferInputChecks(const DeferInputChecks&) = delete;
  DeferInputChecks& operator=(const DeferInputChecks&) = delete;
  ~DeferInputChecks() { current() = outer_; }

  // For a loss on this thread with an input check: the three words to leave its answer in, or null when no scope defers or one loss already has (the loss then checks at once).
  static unsigned long long* defer(std::string (*complaint)(std::size_t, double, double)) {
    DeferInputChecks* scope = current();
    if (scope == nullptr || scope->check_.found != nullptr) return nullptr;
    unsigned long long* found = detail::reduction_found_input();
    scope->check_ = {found, complaint};
    return found;
  }
  // What a loss left on the device in this scope (found null when none did).
  const InputCheck& check() const noexcept { return check_; }

 private:
  static DeferInputChecks*& current() noexcept {
    thread_local DeferInputChecks* scope = nullptr;
    return scope;
  }
  DeferInputChecks* outer_;
  InputCheck check_;
};

namespace detail {

// found = the three words above, from *first (the least index outside the domain, n or more for
// none) and the values there. One thread.
template <class T>
__global__ void record_input_check_kernel(const unsigned long long* first, std::size_t n, const T* input,
                                          const T* target, unsigned long long* found) {
  const unsigned long long i = *first;
  if (i >= n) {
    found[0] = 0;
    return;
  }
  found[0] = ~i;
  found[1] = static_cast<unsigned long long>(__double_as_longlong(static_cast<double>(input[i])));
  found[2] = static_cast<unsigned long long>(__double_as_longlong(static_cast<double>(target[i])));
}

}  // namespace detail

}  // namespace etnn::cuda
